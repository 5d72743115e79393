"""The sparse allreduces of CUDA tensors on the NCCL route, built from the routed collectives so
that they run on the GPU (docs/compression.md, "GPU"): dense_allgather (top-k's dense and
allgather algorithms, sparse tensors' allgather), split (SparCML's split algorithms and ZEN, with
split_owners, split_pulls and the quantizer). The functions take tensors of either device."""
