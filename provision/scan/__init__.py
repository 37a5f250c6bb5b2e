"""Scan: which SMs and PTX CUDA binaries carry."""
