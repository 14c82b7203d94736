"""napkin as a library: the two napkin questions, and a memory check, in a few lines.

Run it with ``python examples/quickstart.py``; a test runs it and checks what it prints.
"""

from napkin.choices import Optimizer, Precision, Sharding
from napkin.compute import Throughput, TrainQuery, train_time
from napkin.memory import max_model, memory
from napkin.profiles import resolve

h100 = resolve("h100").profile

# How long does a 70B model take on 15T tokens with 1024 H100s at MFU 0.5?
run = train_time(
    TrainQuery(params=70e9, tokens=15e12, gpus=1024), h100, "bf16", Throughput(peak_flops=h100.peak("bf16"))
)
print(f"train time: {run.days:.1f} days, {run.gpu_hours:,.0f} GPU-hours, {run.flops:.2e} FLOPs")

# What is the largest model 8 H100s can train with AdamW in fp32, states fully sharded?
biggest = max_model(8, h100, optimizer=Optimizer.adamw, precision=Precision.fp32, sharding=Sharding.zero3)
print(f"max model: {biggest.params / 1e9:.1f} B params at {biggest.bytes_per_param:g} B/param")

# Does a 7B model fit on one H100 with mixed-precision Adam and no sharding?
fit = memory(7e9, h100, optimizer=Optimizer.adam, precision=Precision.mixed, sharding=Sharding.none)
print(f"7B on one H100: {fit.per_gpu_bytes / 1e9:.0f} GB needed, fits: {fit.fits}")
