export PYTHONUNBUFFERED=1 TORCH_CUDA_ARCH_LIST=9.0a
python3 -c "import cuda_kernels" 2>/dev/null || python3 -m pip install --no-build-isolation -e . > /tmp/b.log 2>&1 || tail -20 /tmp/b.log
for dev in cpu cuda; do for case in "ck.matmul(torch.ones(2,device='$dev'),torch.ones(2,2,device='$dev'))" "ck.matmul(torch.ones(2,2,device='$dev'),torch.ones(2,2,device='$dev'),variant=-7)" "ck.square(torch.ones(2,dtype=torch.int32,device='$dev'))"; do
python3 -c "import torch, cuda_kernels as ck
try:
    $case
except RuntimeError as e: print('raised:', str(e).splitlines()[0][:90])"; echo "rc=$? :: $case"; done; done
python3 -c "import torch; t = torch.ones(2, device='cuda')
try:
    torch.ops.aten.mm(t, t)
except RuntimeError as e: print('torch raised ok:', str(e)[:60])"; echo "rc=$? (torch's own error on cuda)"
cuda-gdb -batch -ex run -ex bt --args python3 -c "import torch, cuda_kernels as ck; ck.matmul(torch.ones(2,device='cuda'),torch.ones(2,2,device='cuda'))" 2>&1 | grep -E "^#|signal|SIG" | head -40
