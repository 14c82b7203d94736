"""napkin as a library: the two napkin questions, and a memory check, in a few lines.

Run it with ``python examples/quickstart.py``; a test runs it and checks what it prints.
"""

import napkin

# How long does a 70B model take on 15T tokens with 1024 H100s at MFU 0.5?
run = napkin.train_time(params="70B", tokens="15T", gpus=1024, hardware="h100")
print(f"train time: {run.days:.1f} days, {run.gpu_hours:,.0f} GPU-hours, {run.flops:.2e} FLOPs")

# What is the largest model 8 H100s can train with AdamW in fp32, states fully sharded?
biggest = napkin.max_model(gpus=8, optimizer="adamw", precision="fp32", sharding="zero3")
print(f"max model: {biggest.params / 1e9:.1f} B params at {biggest.bytes_per_param:g} B/param")

# Does a 7B model fit on one H100 with mixed-precision Adam and no sharding?
fit = napkin.memory(params="7B", optimizer="adam", precision="mixed", sharding="none")
print(f"7B on one H100: {fit.per_gpu_bytes / 1e9:.0f} GB needed, fits: {fit.fits}")
