"""One TCP connection between two members: framing, the hello, the write queue.

Frames are a 4-byte big-endian length followed by one encoded bundle. The
reader never trusts a length: anything above ``max_frame_size`` is an error
before a byte of the frame is buffered, so a hostile 2 GB length costs
nothing. A connection starts with a hello in each direction (initiator
first): a bundle from the sender whose one INTERNAL message carries the
sender's listening endpoint and the endpoint the hello is for, as
``b"ip:port>ip:port"``. The first is what the address table needs (the
source port of a TCP connection is not where its member listens). The
second binds a hello to one receiver (the initiator's to the acceptor's
listening endpoint, the acceptor's to the initiator's end of this very
connection): in shared-secret mode a hello captured by a listener that
discovery probed cannot be replayed to another member to pass for its
sender (issue 18), and a replay to the same receiver fails its replay
window. The hello goes through the codec, so another cluster or a newer
wire version is refused before anything else is read.

Writes go straight to the socket when they can: a frame enqueued while
nothing is queued and the writer is idle is written at once with one
non-blocking ``writev`` (POSIX), so a frame costs no task switch. What the
kernel does not take queues on the connection, and the writer task sends
everything queued, coalesced, in one ``send_all``. A connection is *retired* by
half-closing it: its writer flushes what is queued and sends EOF, its reader
keeps reading until the peer's EOF (or ``close_timeout``). Either side may
retire a connection at any time (idle reaping, the simultaneous-connect
tie-break, a peer's EOF) without losing a frame the peer already wrote.
"""

from __future__ import annotations

import os

import trio

from triogroups._error_root import TriogroupsError
from triogroups.address import Address
from triogroups.message import Flag, Message
from triogroups.transports._addresses import Physical
from triogroups.wire import WireCodec, WireError

__all__ = ["Connection", "FrameError", "FrameReader", "decode_hello", "encode_hello", "frame"]

_INTERNAL = int(Flag.INTERNAL)
_CHUNK = 1 << 18
_WRITE_CHUNK = 1 << 20  # coalesce up to this much per send_all


class FrameError(TriogroupsError):
    """A byte stream that cannot be framed; ``reason`` is a stats key."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


def frame(data: bytes) -> bytes:
    """The 4-byte length prefix of ``data``."""
    return len(data).to_bytes(4, "big")


def encode_hello(codec: WireCodec, me: Address, listening: Physical, to: Physical) -> bytes:
    """The framed hello of ``me``, who listens at ``listening``, for the endpoint ``to``."""
    payload = f"{listening[0]}:{listening[1]}>{to[0]}:{to[1]}".encode()
    data = codec.encode(None, me, [Message(None, payload, flags=_INTERNAL)])
    return frame(data) + data


def _endpoint(text: str) -> Physical:
    host, sep, port = text.rpartition(":")
    if not sep or not host or len(host) > 255 or not port.isdigit() or not 0 < int(port) < 65536:
        raise WireError("bad_hello", "hello payload is not ip:port>ip:port")
    return host, int(port)


def decode_hello(
    codec: WireCodec, data: bytes | memoryview, at: Physical
) -> tuple[Address, Physical]:
    """The peer's address and listening endpoint, or WireError: ``bad_hello``,
    ``wrong_dest`` (a hello for another endpoint than ``at``), or the codec's."""
    bundle = codec.decode(data)
    if len(bundle.messages) != 1 or bundle.messages[0].flags != _INTERNAL:
        raise WireError("bad_hello", "a hello carries exactly one internal message")
    listening, sep, to = bundle.messages[0].payload.decode(errors="replace").partition(">")
    if not sep:
        raise WireError("bad_hello", "hello payload is not ip:port>ip:port")
    listening_at, to_at = _endpoint(listening), _endpoint(to)
    if to_at != (at[0], at[1]):
        raise WireError("wrong_dest", f"hello for {to_at[0]}:{to_at[1]}, not {at[0]}:{at[1]}")
    return bundle.src, listening_at


class FrameReader:
    """Splits a socket's byte stream into frames of at most ``max_frame_size`` bytes.

    Reads go into one buffer that lives as long as the connection, and frames
    come out as memoryviews of it: no copy per read or per frame (the decoder
    copies what it keeps). A returned frame is valid until the next call to
    `frames` or `first`. Data already in the kernel is read without awaiting,
    so the caller must checkpoint itself (the read loop's ``up.send`` does).
    """

    def __init__(self, sock: trio.socket.SocketType, max_frame_size: int) -> None:
        self.sock = sock
        self.max_frame_size = max_frame_size
        self._buf = bytearray(_CHUNK)
        self._view = memoryview(self._buf)
        self._start = 0  # first byte not yet returned in a frame
        self._end = 0  # end of the bytes read
        self._ready: list[memoryview] = []

    async def frames(self) -> list[memoryview]:
        """Every complete frame available (at least one), or [] at a clean EOF.

        Raises FrameError on an oversized or empty length, or an EOF inside a
        frame; OSError and trio.ClosedResourceError pass through.
        """
        ready = self._ready
        while not ready:
            self._make_room()
            read = await self._read(self._view[self._end :])
            if not read:
                if self._end > self._start:
                    detail = f"connection closed {self._end - self._start} bytes into a frame"
                    raise FrameError("truncated", detail)
                return []
            self._end += read
            self._split(ready)
        self._ready = []
        return ready

    async def first(self) -> memoryview | None:
        """The next single frame (the rest stay buffered), or None at EOF."""
        if not self._ready:
            self._ready = await self.frames()
        return self._ready.pop(0) if self._ready else None

    async def _read(self, into: memoryview) -> int:
        fd = self.sock.fileno()
        while True:
            try:
                return os.readv(fd, (into,))
            except BlockingIOError:
                await trio.lowlevel.wait_readable(self.sock)
                fd = self.sock.fileno()

    def _split(self, ready: list[memoryview]) -> None:
        buf, view = self._buf, self._view
        pos, end = self._start, self._end
        while end - pos >= 4:
            length = int.from_bytes(buf[pos : pos + 4], "big")
            if length > self.max_frame_size:
                raise FrameError(
                    "oversized",
                    f"frame length {length} exceeds max_frame_size {self.max_frame_size}",
                )
            if length == 0:
                raise FrameError("malformed", "empty frame")
            stop = pos + 4 + length
            if stop > end:
                break
            ready.append(view[pos + 4 : stop])
            pos = stop
        if pos == end:
            pos = end = 0
        self._start, self._end = pos, end

    def _make_room(self) -> None:
        """Room to read at least the rest of the pending frame (or a chunk) after ``_end``.

        Only called once every returned frame is done with: it moves bytes
        that earlier frames' views may point at.
        """
        start, end = self._start, self._end
        pending = end - start
        needed = _CHUNK // 4
        if pending >= 4:
            needed = max(needed, 4 + int.from_bytes(self._buf[start : start + 4], "big"))
        if len(self._buf) - end >= needed - pending:
            return
        old = self._buf
        if needed > len(old):  # a frame larger than the buffer: a larger buffer from now on
            self._buf = bytearray(needed)
            self._view = memoryview(self._buf)
        self._buf[:pending] = old[start:end]
        self._start, self._end = 0, pending


class Connection:
    """A registered connection to ``peer``: its stream, reader and write queue."""

    def __init__(
        self,
        stream: trio.SocketStream,
        reader: FrameReader,
        peer: Address,
        peer_physical: Physical,
        initiator: Address,
    ) -> None:
        self.stream = stream
        self.reader = reader
        self.peer = peer
        self.peer_physical = peer_physical
        self.initiator = initiator
        self.out: list[bytes] = []
        self.out_bytes = 0
        self.retiring = False
        self.closed = False
        self.last_used = trio.current_time()
        self.scope = trio.CancelScope()
        self._wake = trio.Event()
        self._room = trio.Event()
        self._sending = False  # the writer holds taken bytes not yet fully sent

    def enqueue(self, data: bytes) -> None:
        """Send one encoded bundle (framed here) now if the socket takes it, else queue it.

        Order is kept: the direct write is only tried while nothing is queued
        and the writer is not inside a send. A partial write queues the rest;
        an error queues the whole frame, and the writer's ``send_all`` then
        reports the broken stream as it always has.
        """
        head = frame(data)
        if not self.out and not self._sending and not self.retiring and not self.closed:
            sent = self._write_now(head, data)
            if sent == len(head) + len(data):
                self.last_used = trio.current_time()
                return
            if sent >= len(head):
                head, data = b"", data[sent - len(head) :]
            elif sent:
                head = head[sent:]
        self.out.append(head)
        self.out.append(data)
        self.out_bytes += len(head) + len(data)
        self._wake.set()

    def _write_now(self, head: bytes, data: bytes) -> int:
        """Bytes the kernel took without blocking (0 when full, closed or broken)."""
        fd = self.stream.socket.fileno()  # -1 once closed; checked right before the write
        if fd < 0:
            return 0
        try:
            return os.writev(fd, (head, data))
        except OSError:  # BlockingIOError, or a broken stream the writer will report
            return 0

    def retire(self, close_timeout: float) -> None:
        """Stop writing after what is queued, send EOF, read on until the peer's EOF."""
        if not self.retiring:
            self.retiring = True
            self.scope.deadline = min(self.scope.deadline, trio.current_time() + close_timeout)
            self._wake.set()

    def close(self) -> None:
        self.closed = True
        self._wake.set()
        self._room.set()

    async def wait_room(self, limit: int) -> None:
        """Return once fewer than ``limit`` bytes wait for the writer (or it closed)."""
        while self.out_bytes >= limit and not self.closed:
            await self._room.wait()

    def _take(self, limit: int) -> bytes:
        """Queued frames, joined, up to about ``limit`` bytes (at least one frame)."""
        out = self.out
        if self.out_bytes <= limit:
            data = b"".join(out)
            out.clear()
            self.out_bytes = 0
            return data
        taken = 0
        count = 0
        while count < len(out) and taken < limit:
            taken += len(out[count]) + len(out[count + 1])
            count += 2
        data = b"".join(out[:count])
        del out[:count]
        self.out_bytes -= taken
        return data

    async def write_loop(self) -> None:
        """Send queued frames, coalesced, until retired (then EOF) or closed.

        Raises trio.BrokenResourceError / ClosedResourceError when the stream breaks.
        """
        while not self.closed:
            if not self.out:
                if self.retiring:
                    await self.stream.send_eof()
                    return
                await self._wake.wait()
                self._wake = trio.Event()
                continue
            data = self._take(_WRITE_CHUNK)
            self._room.set()
            self._room = trio.Event()
            self.last_used = trio.current_time()
            self._sending = True
            await self.stream.send_all(data)
            self._sending = False
