"""The per-run settings an engine has: on/off switches it lacks or runs only beside another (rules.switches,
rules.switch_needs) and words it does not run (rules.setting_words), each refused naming the setting."""

from __future__ import annotations

from planner.engine.profile import Engine
from planner.engine.settings import SWITCHES
from planner.plan import Rejected


def switch_problems(engine: Engine) -> list[Rejected]:
    """An on/off setting turned on that the engine does not have (rules.switches), or without the one it needs."""
    has, name = engine.rules.switches, engine.name
    out = [
        Rejected(f"{name} has no {s}", f"{s}: {name} has no such setting (it has {', '.join(has) or 'none'})")
        for s in SWITCHES
        if engine.setting(s) and s not in has
    ]
    return out + [
        Rejected(f"{name}: {s} without {need}", f"{s}: {name} runs it only with {need} on; give --{need} too")
        for s, need in engine.rules.switch_needs.items()
        if engine.setting(s) and not engine.setting(need)
    ]


# The command-line flags of the word settings whose flag is not the setting's own name.
_WORD_FLAGS = {"selective_recompute": "--selective-policy", "attention": "--no-flash"}


def word_problems(engine: Engine) -> list[Rejected]:
    """A setting's word that the engine does not run (rules.setting_words)."""
    out: list[Rejected] = []
    for setting, words in engine.rules.setting_words.items():
        value = engine.setting(setting)
        if value not in words:
            flag = f" ({_WORD_FLAGS[setting]})" if setting in _WORD_FLAGS else ""
            detail = f"{setting}={value}{flag}: {engine.name} runs {' or '.join(words)}"
            out.append(Rejected(f"{engine.name} has no {setting} {value}", detail))
    return out
