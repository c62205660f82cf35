"""The network beyond the NVLink domain (planner/cluster/fabric.py): cluster files, the tier a group crosses, and
that every collective is costed on it (cost/comm.py group_link, cost/moe.py) while nothing changes without one."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from helpers import make_hw
from helpers import run_planner as run

from planner.cluster import Cluster, Tier, cluster_of, network_tier, on_cluster, tier_name
from planner.cost.comm import group_link
from planner.cost.moe import all_to_all_s
from planner.cost.schedule import step_time
from planner.errors import PlannerError
from planner.io.catalog import load_engine, load_hardware, load_model
from planner.io.clusters import cluster_hardware, list_clusters, load_cluster
from planner.plan import Plan

SHIPPED = ("dgx-superpod-h100", "dgx-superpod-b200", "gb200-nvl72-superpod", "rail-fat-tree-2to1", "meta-llama3-24k")


def _tier(name: str, gpus: int, gbs: float, lat_us: float) -> Tier:
    return Tier(name=name, gpus=gpus, bandwidth_bytes_per_s=gbs * 1e9, latency_s=lat_us * 1e-6, source="test")


def _cluster(*tiers: Tier) -> Cluster:
    return Cluster(name="test", hardware="test-gpu", tiers=tiers)


TWO_TO_ONE = _cluster(_tier("leaf", 64, 25, 8), _tier("spine", 1024, 12.5, 9))


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_clusters_load_and_cite(name):
    """Every shipped cluster validates, holds whole NVLink domains of its own GPU, and cites every tier."""
    assert name in list_clusters()
    hw = cluster_hardware(name, None)
    c = cluster_of(hw)
    assert c is not None and c.name == name and hw.name == c.hardware
    assert all(t.gpus % hw.nvlink_domain == 0 and t.source for t in c.tiers)
    assert c.failures is not None and "16,384" in c.failures.source
    # the Llama 3 rate: 419 interruptions in 54 days on 16,384 GPUs
    assert c.failures.gpu_mtbf_hours == pytest.approx(54 * 24 * 16384 / 419, rel=1e-4)


def test_oversubscribed_spine_halves_the_share():
    """The 2:1 fat tree gives each GPU half its NIC beyond the leaf; the SuperPOD's full fat tree does not."""
    fat = load_cluster("rail-fat-tree-2to1")
    pod = load_cluster("dgx-superpod-h100")
    assert fat.tiers[1].bandwidth_bytes_per_s == fat.tiers[0].bandwidth_bytes_per_s / 2
    assert {t.bandwidth_bytes_per_s for t in pod.tiers} == {50e9}


def test_tier_of_a_group_follows_the_rank_order():
    """A group of n ranks `stride` apart spans n·stride ranks: inside the domain it is NVLink, then the
    smallest tier that holds it; beyond the cluster it is refused."""
    hw = on_cluster(make_hw(), TWO_TO_ONE)
    assert tier_name(hw, n=8, stride=1) == "nvlink"
    assert tier_name(hw, n=8, stride=8) == "leaf"  # 64 ranks
    assert tier_name(hw, n=16, stride=8) == "spine"  # 128 ranks
    assert tier_name(hw, n=1024, stride=1) == "spine"
    with pytest.raises(PlannerError, match="do not fit on cluster test"):
        network_tier(hw, span=2048)


def test_group_link_uses_the_crossed_tier():
    """Bandwidth min(intra, k × tier share × efficiency) and the tier's latency; the leaf tier equal to the NIC
    gives exactly the profile's link; without a cluster the link is unchanged."""
    base = make_hw()
    same = on_cluster(base, _cluster(_tier("leaf", 64, 25, 8), _tier("spine", 1024, 25, 8)))
    hw = on_cluster(base, TWO_TO_ONE)
    plain = group_link(base, n=16, stride=8)
    assert plain.tier == "network"
    flat = dataclasses.replace(group_link(same, n=16, stride=8), levels=())  # the ring's link, without the tiers
    assert flat == dataclasses.replace(plain, tier="spine", levels=())
    leaf, spine = group_link(hw, n=8, stride=8), group_link(hw, n=16, stride=8)
    assert (leaf.tier, spine.tier) == ("leaf", "spine")
    assert leaf.bandwidth_bytes_per_s == pytest.approx(25e9 * 0.8)
    assert spine.bandwidth_bytes_per_s == pytest.approx(12.5e9 * 0.8)
    assert spine.latency_s == pytest.approx(9e-6)
    # k ranks of a domain drive k NICs: tp-sized groups of 2 per domain (stride 4) reach 2 shares
    assert group_link(hw, n=64, stride=4).bandwidth_bytes_per_s == pytest.approx(2 * 12.5e9 * 0.8)
    # inside the domain the cluster changes nothing
    assert group_link(hw, n=8, stride=1) == group_link(base, n=8, stride=1)


def test_all_to_all_crosses_the_same_tier():
    """The MoE all-to-all (cost/moe.py) reads the tier from the same place: slower beyond an oversubscribed spine."""
    base, hw = make_hw(), on_cluster(make_hw(), TWO_TO_ONE)
    leaf_fast = all_to_all_s(base, nbytes=1e9, n=8, stride=8)
    assert all_to_all_s(hw, nbytes=1e9, n=8, stride=8) == pytest.approx(leaf_fast)  # leaf = the NIC here
    assert all_to_all_s(hw, nbytes=1e9, n=16, stride=8) > 1.9 * all_to_all_s(base, nbytes=1e9, n=16, stride=8)


def test_estimate_slower_only_where_groups_cross_the_spine():
    """Llama 3 8B: a plan inside one leaf costs the same with the 2:1 cluster as without (its leaf is the NIC);
    at 2,048 GPUs the dp group crosses the spine at half the share and its exposed dp time grows (by less than
    the share halves: the hierarchical all-reduce sends only 1/128 of it across the spine, cost/comm.py)."""
    model, engine = load_model("llama3-8b"), load_engine("megatron")
    h100 = load_hardware("h100-sxm")
    fat = cluster_hardware("rail-fat-tree-2to1", None)
    small = Plan(dp=32, tp=8, global_batch=512, seq_len=8192)
    assert step_time(model, fat, small, engine).step_s == pytest.approx(step_time(model, h100, small, engine).step_s)
    big = Plan(dp=1024, tp=2, global_batch=1024, seq_len=8192)
    plain, on_fat = step_time(model, h100, big, engine), step_time(model, fat, big, engine)
    assert 2 * plain.exposed_comm_s["dp"] > on_fat.exposed_comm_s["dp"] > 1.1 * plain.exposed_comm_s["dp"] > 0
    assert on_fat.compute_s == pytest.approx(plain.compute_s)


@pytest.mark.parametrize(
    ("tiers", "match"),
    [
        ((_tier("leaf", 64, 25, 8), _tier("spine", 96, 25, 8)), "must be a multiple"),
        ((_tier("leaf", 64, 25, 8), _tier("spine", 128, 50, 8)), "more than tier 'leaf'"),
        ((_tier("leaf", 64, 25, 8), _tier("spine", 128, 25, 7)), "latency"),
    ],
)
def test_bad_cluster_refused_with_both_values(tiers, match):
    with pytest.raises(ValueError, match=match):
        _cluster(*tiers)


def test_tiers_must_hold_whole_domains():
    with pytest.raises(PlannerError, match="NVLink domain of 72"):
        on_cluster(load_hardware("gb200-nvl72"), load_cluster("dgx-superpod-h100"))


def test_a_tier_faster_than_the_gpus_nics_is_priced_at_the_nics():
    """A 500 GB/s leaf was priced at 500 GB/s on H100s whose NICs carry 50 GB/s per GPU: every byte that leaves the
    NVLink domain goes through them, so the tier is priced at the NICs' rate, and that is said."""
    hw = load_hardware("h100-sxm")
    fast = _cluster(_tier("leaf", 256, 500, 5), _tier("spine", 2048, 50, 5.5))
    with pytest.warns(UserWarning, match=r"tier 'leaf' gives 500 GB/s per GPU, more than h100-sxm's NICs carry \(50"):
        placed = on_cluster(hw, fast)
    assert network_tier(placed, span=64)[1].bandwidth_bytes_per_s == 50e9
    assert network_tier(placed, span=1024)[1].bandwidth_bytes_per_s == 50e9
    with pytest.warns(UserWarning, match=r"cluster fast\.yaml: tier 'leaf'"):  # named as the user gave it
        on_cluster(hw, fast, "fast.yaml")
    slow = _cluster(_tier("leaf", 256, 25, 5), _tier("spine", 2048, 12.5, 5.5))
    assert network_tier(on_cluster(hw, slow), span=64)[1].bandwidth_bytes_per_s == 25e9  # below the NICs: as given


def test_cluster_file_errors_are_one_line(tmp_path: Path):
    bad = tmp_path / "c.yaml"
    bad.write_text(
        "name: x\nhardware: h100-sxm\ntiers:\n  - {name: leaf, gpus: 256, bandwith_bytes_per_s: 5e10, "
        "latency_s: 5e-6, source: s}\n"
    )
    code, out, err = run("search", "-m", "llama3-8b", "--gpus", "64", "--cluster", str(bad))
    assert code == 2 and out == ""
    assert "bandwith_bytes_per_s: unknown field" in err and "Traceback" not in err
    code, _, err = run("search", "-m", "llama3-8b", "--gpus", "64", "--cluster", "no-such-pod")
    assert code == 2 and "known: dgx-superpod-b200, dgx-superpod-h100, gb200-nvl72-superpod, meta-llama3-24k" in err
    code, _, err = run("search", "-m", "llama3-8b", "--gpus", "32768", "--cluster", "dgx-superpod-h100")
    assert code == 2 and "more than cluster dgx-superpod-h100 holds (16384 GPUs)" in err
    misspelt = tmp_path / "pod.yaml"  # the GPU a cluster file names, misspelt: said as the file's, by the name given
    misspelt.write_text((Path(__file__).parents[1] / "cluster_profiles" / "dgx-superpod-h100.yaml").read_text()
                        .replace("hardware: h100-sxm", "hardware: h100-sx"))  # fmt: skip
    code, _, err = run("search", "-m", "llama3-8b", "--gpus", "64", "--cluster", str(misspelt))
    assert code == 2 and f'cluster {misspelt}: hardware: unknown hardware "h100-sx"' in err


def test_a_cluster_files_failures_and_storage_keep_to_the_options_bounds(tmp_path: Path):
    """A file's 0.5 h MTBF passed its own check (> 0) and was then refused as "--mtbf-hours 0.5", an option the user
    never gave; 1 B/s of storage as --checkpoint-bandwidth. The file's check now has the options' bounds and names
    the file and field. A tier list whose items fail does not add pydantic's 'at least 1 item' dump; a folder is
    said as one (audit)."""
    text = (Path(__file__).parents[1] / "cluster_profiles" / "meta-llama3-24k.yaml").read_text()
    assert "gpu_mtbf_hours: " in text and "checkpoint_write_bytes_per_s: " in text
    for old, new, said in (
        ("gpu_mtbf_hours: ", "gpu_mtbf_hours: 0.5 #",
         "failures.gpu_mtbf_hours: Input should be greater than or equal to 1"),
        ("checkpoint_write_bytes_per_s: ", "checkpoint_write_bytes_per_s: 1 #",
         "checkpoint_write_bytes_per_s: Input should be greater than or equal to 1000000"),
    ):  # fmt: skip
        bad = tmp_path / "pod.yaml"
        bad.write_text(text.replace(old, new, 1))
        code, out, err = run("scale", "-m", "llama3-8b", "--tokens", "1e12", "--gpus", "64", "--cluster", str(bad))
        assert code == 2 and out == "" and f"error: {bad}: " in err and said in err and "--" not in err, err
    tiers = tmp_path / "tiers.yaml"
    tiers.write_text("name: x\nhardware: h100-sxm\ntiers:\n  - {name: leaf, gpus: 1024}\n")
    code, _, err = run("search", "-m", "llama3-8b", "--gpus", "64", "--cluster", str(tiers))
    assert code == 2 and "tiers.0.latency_s: missing (required)" in err and "at least 1 item" not in err, err
    code, _, err = run("search", "-m", "llama3-8b", "--gpus", "64", "--cluster", str(tmp_path))
    assert code == 2 and err.strip() == f"error: --cluster {str(tmp_path)!r}: is a folder, give a cluster .yaml"


def test_cluster_sets_the_gpu_and_changes_the_ranking_cost():
    """--cluster alone picks the cluster's GPU; on the 2:1 tree the same search is slower than on the
    full-bisection SuperPOD."""
    args = ("search", "-m", "llama3-70b", "--gpus", "4096", "--global-batch", "1024", "--top", "1", "--json")
    code, out, err = run(*args, "--cluster", "rail-fat-tree-2to1")
    assert code == 0, err
    fat = json.loads(out)
    code, out, err = run(*args, "--cluster", "dgx-superpod-h100")
    assert code == 0, err
    pod = json.loads(out)
    assert fat["plans"][0]["tokens_per_s"] < pod["plans"][0]["tokens_per_s"]


def test_a_profile_alone_has_no_cluster():
    assert cluster_of(load_hardware("h100-sxm")) is None
    assert cluster_of(make_hw()) is None


def test_the_output_names_the_cluster_and_its_tiers():
    args = ("-m", "llama3-8b", "--gpus", "512", "--cluster", "rail-fat-tree-2to1")
    code, out, err = run("search", *args, "--top", "1")
    assert code == 0, err
    assert "cluster rail-fat-tree-2to1: nvlink 8 GPUs, leaf 256 GPUs 50 GB/s, spine 8192 GPUs 25 GB/s" in " ".join(
        out.split()
    )
    code, out, err = run("search", *args, "--top", "1", "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert [t["name"] for t in doc["cluster"]["tiers"]] == ["leaf", "spine", "core"]
    code, out, err = run("estimate", *args, "--tp", "8")
    assert code == 0 and "cluster rail-fat-tree-2to1" in out
    code, out, err = run("search", "-m", "llama3-8b", "--gpus", "512", "--top", "1", "--json")
    assert "cluster" not in json.loads(out)


def test_llama3_cluster_is_the_papers():
    """Dubey et al. 2024 §3.3.1: racks of 16 GPUs, pods of 3,072 at full bisection, 24K GPUs at 1:7 above the pod,
    400 Gbps per GPU, Tectonic storage sustaining 2 TB/s."""
    c = load_cluster("llama3-cluster")  # by its alias
    assert [(t.name, t.gpus) for t in c.tiers] == [("rack", 16), ("pod", 3072), ("cluster", 24576)]
    assert c.tiers[1].bandwidth_bytes_per_s == 50e9
    assert c.tiers[2].bandwidth_bytes_per_s == pytest.approx(50e9 / 7, rel=1e-3)
    assert c.checkpoint_write_bytes_per_s == 2e12


def test_a_plan_saved_on_a_cluster_reads_back_on_it(tmp_path):
    """search --cluster --save writes the cluster, and --plan prices on it: the file gave 13% more tokens/s on a
    flat network (audit: Llama 3 70B on 2,048 GPUs of a 2:1 fat tree, dp and pp on the spine)."""
    path = tmp_path / "plan.yaml"
    code, out, err = run("search", "-m", "llama3-70b", "--gpus", "2048", "--cluster", "rail-fat-tree-2to1",
                         "--max-cp", "1", "--save", str(path), "--top", "1", "--no-advice", "--json")  # fmt: skip
    assert code == 0, err
    searched = json.loads(out)["plans"][0]
    assert "cluster: rail-fat-tree-2to1" in path.read_text()
    code, out, err = run("estimate", "--plan", str(path), "--json")
    assert code == 0, err
    estimated = json.loads(out)
    assert estimated["tokens_per_s"] == pytest.approx(searched["tokens_per_s"])
    assert estimated["tiers"]["dp"] == "spine"


def test_a_cluster_with_another_gpu_says_so_and_estimate_json_names_its_cluster():
    """GB300s priced on the GB200 SuperPOD's tiers are said to be; a capped profile of the cluster's own GPU is
    not another GPU. estimate --json carries the cluster as search --json does (it had none)."""
    code, out, err = run("estimate", "-m", "llama3-8b", "--hardware", "gb300-nvl72", "--gpus", "72",
                         "--cluster", "gb200-nvl72-superpod", "--json")  # fmt: skip
    assert code == 0 and "is built of NVIDIA GB200 (gb200-nvl72); priced with gb300-nvl72's" in " ".join(err.split())
    assert json.loads(out)["cluster"]["name"] == "gb200-nvl72-superpod"
    code, out, err = run("estimate", "-m", "llama3-8b", "--hardware", "b200-700w", "--gpus", "64",
                         "--cluster", "dgx-superpod-b200")  # fmt: skip
    assert code == 0 and "built of" not in err, err
