#!/usr/bin/env python3
"""translate.py IN OUT: a CUDA source (.cu, .cuh) as C++ for the CPU emulation (tools/cuda-emu/include/emu_core.h).

Kernel launches `k<<<grid, block[, smem[, stream]]>>>(args)` become emu_launch calls (through a generic lambda, so
that template arguments are deduced from the arguments as nvcc does); `__shared__` arrays become statics (blocks
run one after another), registered so that the emulator poisons them before each block, and the dynamic
`extern __shared__` array the launch's buffer.
"""
import re
import sys


def split_top(s):
    parts, depth, cur = [], 0, ''
    for ch in s:
        depth += ch in '([{'
        depth -= ch in ')]}'
        if ch == ',' and depth == 0:
            parts.append(cur.strip())
            cur = ''
        else:
            cur += ch
    return parts + [cur.strip()]


src = open(sys.argv[1]).read()
out, at = '', 0
for m in re.finditer(r'([\w:]+(?:<[^<>;]*>)?)\s*<<<(.*?)>>>\(', src, re.S):
    cfg = split_top(m.group(2))
    cfg += ['0', 'nullptr'][len(cfg) - 2:]
    out += src[at:m.start()] + (f'emu_launch(emu_dim({cfg[0]}), emu_dim({cfg[1]}), size_t({cfg[2]}), {cfg[3]}, '
                                f'[=](auto... emu_a) {{ {m.group(1)}(emu_a...); }}, ')
    at = m.end()
out += src[at:]
out = re.sub(r'extern __shared__ __align__\(\d+\) unsigned char (\w+)\[\];', r'unsigned char* \1 = emu_smem_ptr;', out)
out = re.sub(r'extern __shared__ (\w+) (\w+)\[\];', r'\1* \2 = reinterpret_cast<\1*>(emu_smem_ptr);', out)


def static_shared(m):
    names = [re.match(r'\w+', d).group(0) for d in split_top(m.group(3))]
    arrays = ', '.join(f'{{{n}, sizeof {n}}}' for n in names)
    return (f'{m.group(1) or ""}static {m.group(2)} {m.group(3)}; '
            f'[[maybe_unused]] static const bool emu_shared_{names[0]} = emu_shared_static({{{arrays}}});')


out = re.sub(r'__shared__ (__align__\(\d+\) )?([\w:]+) ([^;]+);', static_shared, out)
out = '#include <cuda_runtime_api.h>\n' + out
try:
    unchanged = open(sys.argv[2]).read() == out
except OSError:
    unchanged = False
if not unchanged:  # an unchanged translation keeps its time, so run.sh does not recompile it
    open(sys.argv[2], 'w').write(out)
