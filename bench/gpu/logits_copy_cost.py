#!/usr/bin/env python3
"""The device-to-host copy of a verification batch's target logits, (γ+1) × V float32, as llama.cpp makes it after each
target call: into pinned memory (ggml-cuda's host buffer, where llama.cpp keeps its outputs) and into pageable
memory; medians of 200 copies. Needs PyTorch with CUDA (docs/gpu.md).   python3 bench/gpu/logits_copy_cost.py"""
import statistics, time, torch
dev = torch.device("cuda")
print(torch.cuda.get_device_name(0), torch.__version__)
for V in (32000, 128256):
    for g in (1, 4, 8, 16):
        rows = g + 1
        src = torch.randn(rows, V, device=dev, dtype=torch.float32)
        pinned = torch.empty(rows, V, dtype=torch.float32, pin_memory=True)
        pageable = torch.empty(rows, V, dtype=torch.float32)
        res = {}
        for name, dst in (("pinned", pinned), ("pageable", pageable)):
            for _ in range(20): dst.copy_(src); torch.cuda.synchronize()
            ts = []
            for _ in range(200):
                torch.cuda.synchronize(); t = time.perf_counter(); dst.copy_(src); torch.cuda.synchronize(); ts.append(time.perf_counter() - t)
            res[name] = statistics.median(ts) * 1e6
        mb = rows * V * 4 / 1e6
        print(f"V={V} gamma={g} bytes={rows*V*4} ({mb:.2f} MB): pinned {res['pinned']:.1f} us ({mb/res['pinned']*1e6/1e3:.1f} GB/s), pageable {res['pageable']:.1f} us ({mb/res['pageable']*1e6/1e3:.1f} GB/s)")
