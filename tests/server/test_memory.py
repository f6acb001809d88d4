"""The server's memory stays flat: glibc's mmap threshold is pinned (a freed large block would
otherwise raise it, and later batch buffers would fragment the heap)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

MODULE = Path(__file__).resolve().parents[2] / "isorag_pyg" / "server" / "memory.py"

PROBE = """
import ctypes, ctypes.util, importlib.util, sys
spec = importlib.util.spec_from_file_location("memory", sys.argv[2])  # the module alone: no torch to import
memory = importlib.util.module_from_spec(spec)
spec.loader.exec_module(memory)

class MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in
                ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]

libc = ctypes.CDLL(ctypes.util.find_library("c"))
libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
libc.mallinfo2.restype = MallInfo2
if sys.argv[1] == "pinned":
    assert memory.pin_mmap_threshold()
libc.free(libc.malloc(8 << 20))  # a large block, mapped, then freed: glibc raises the threshold past it
before = libc.mallinfo2().hblks
block = libc.malloc(512 << 10)  # a batch-sized buffer: mapped only while the threshold stays put
print(libc.mallinfo2().hblks - before)
libc.free(block)
"""


def mapped_after_a_large_free(mode: str) -> int:
    done = subprocess.run([sys.executable, "-c", PROBE, mode, str(MODULE)], capture_output=True, text=True, check=True)
    return int(done.stdout.strip())


def test_batch_sized_buffers_stay_mapped_once_the_threshold_is_pinned():
    assert mapped_after_a_large_free("default") == 0  # glibc's own behaviour: it comes from the heap
    assert mapped_after_a_large_free("pinned") == 1


def test_the_server_pins_the_threshold_before_loading_its_index():
    import inspect

    from isorag_pyg.server import runner

    source = inspect.getsource(runner.serve)
    assert source.index("pin_mmap_threshold()") < source.index("ISORAGIndex.load(")
