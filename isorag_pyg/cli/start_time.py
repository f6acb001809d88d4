"""When the ``isorag`` command started (``isorag query --timings`` reports its imports from here)."""
import time

STARTED = time.perf_counter()
