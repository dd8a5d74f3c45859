"""CUDA tensors through host memory, as gloo does (ProcessGroupGloo's AsyncAllreduceCUDAWork): a
copy into a pinned host buffer on a side stream that waits for the tensor's producers, a wait for
that copy on the communication thread, the reduction on the host, the copy back on the side
stream, and a future that carries the device, so a consumer waits on the side stream's work
before it reads the tensor (DDP's reducer does). Pinned buffers are reused by dtype and size.

NOT RUN ON A GPU YET: this project's machines have none; tests/gpu/ checks it where one exists.
"""
import threading

import torch


class CudaStaging:
    def __init__(self):
        self._lock = threading.Lock()
        self._free = {}     # (dtype, numel) -> pinned host buffers not in use
        self._streams = {}  # device -> side stream

    def _stream(self, device):
        with self._lock:
            if device not in self._streams:
                self._streams[device] = torch.cuda.Stream(device=device)
            return self._streams[device]

    def _take(self, dtype, numel):
        with self._lock:
            free = self._free.get((dtype, numel))
            if free:
                return free.pop()
        return torch.empty(numel, dtype=dtype, pin_memory=True)

    def _give(self, buffer):
        with self._lock:
            self._free.setdefault((buffer.dtype, buffer.numel()), []).append(buffer)

    def stage(self, tensor, copy_in=True):
        """On the caller's thread: a host buffer for `tensor`, with the copy into it started
        (after the tensor's producers) unless copy_in is False."""
        stream = self._stream(tensor.device)
        host = self._take(tensor.dtype, tensor.numel())
        copied = torch.cuda.Event()
        if copy_in:
            stream.wait_stream(torch.cuda.current_stream(tensor.device))
            with torch.cuda.stream(stream):
                host.copy_(tensor.reshape(-1), non_blocking=True)
            tensor.record_stream(stream)  # the allocator keeps it until the side stream is done
        copied.record(stream)
        return Staged(tensor, host, stream, copied)

    @staticmethod
    def future(tensor):
        """A future that makes its consumers' streams wait for the work it was completed after."""
        return torch.futures.Future(devices=[tensor.device])

    def finish(self, copy_back, release):
        """On the communication thread, after the reduction: the host buffers of `copy_back` go to
        their tensors on the side stream, which this thread's current stream (where the future
        records what its consumers wait for) then waits on; every buffer is reused once copied."""
        for s in copy_back:
            with torch.cuda.stream(s.stream):
                s.tensor.copy_(s.host.view_as(s.tensor), non_blocking=True)
                s.copied.record(s.stream)
            s.tensor.record_stream(s.stream)
            torch.cuda.current_stream(s.tensor.device).wait_stream(s.stream)
        for s in list(copy_back) + list(release):
            s.copied.synchronize()
            self._give(s.host)


class Staged:
    def __init__(self, tensor, host, stream, copied):
        self.tensor, self.host, self.stream, self.copied = tensor, host, stream, copied

    def ready(self):
        """On the communication thread: the host copy, once complete."""
        self.copied.synchronize()
        return self.host
