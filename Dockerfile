# A container image for `planner launch --emit k8s --image ...`: torch (from the base image) plus planner.
#   docker build -t REGISTRY/planner:TAG . && docker push REGISTRY/planner:TAG
# The base must carry a CUDA build of torch >= 2.6 (FSDP2, pipelining); pass another with --build-arg BASE=...
ARG BASE=pytorch/pytorch:latest
FROM ${BASE}
COPY . /opt/planner
RUN pip install --no-cache-dir /opt/planner
WORKDIR /workspace
