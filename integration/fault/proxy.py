"""Small TCP proxies the fault suite owns, for network nemeses.

One asyncio loop in a daemon thread serves every Proxy. A Proxy listens on
127.0.0.1:listen and forwards each connection to 127.0.0.1:target. Two
controls, both safe to call from any thread:
  cut(True)      closes the connections it carries and closes at once every
                 new one (a partition; clients see resets, as across a
                 failed link); cut(False) heals it.
  delay(seconds) holds each chunk that long before passing it on, in both
                 directions (a slow link); delay(0) undoes it.
Traffic stays on loopback. Proxies close with ProxySet.close().
"""

import asyncio
import threading


class Proxy:
    def __init__(self, loop, listen, target, name):
        self.loop, self.listen, self.target, self.name = loop, listen, target, name
        self.cut_ = False
        self.latency = 0.0
        self.conns = set()
        self.server = None
        self.accepted = 0

    async def _start(self):
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", self.listen,
                                                 reuse_address=True)

    async def _pipe(self, reader, writer):
        q = asyncio.Queue()

        async def pump_out():
            while True:
                due, data = await q.get()
                if data is None:
                    break
                wait = due - self.loop.time()
                if wait > 0:
                    await asyncio.sleep(wait)
                writer.write(data)
                await writer.drain()

        out = asyncio.ensure_future(pump_out())
        try:
            while True:
                data = await reader.read(65536)
                if not data:
                    break
                await q.put((self.loop.time() + self.latency, data))
            await q.put((0, None))
            await out
        except (ConnectionError, OSError, asyncio.CancelledError):
            pass
        finally:
            out.cancel()
            try:
                writer.close()
            except Exception:  # noqa: BLE001 - the other side may be gone already
                pass

    async def _serve(self, creader, cwriter):
        self.accepted += 1
        if self.cut_:
            cwriter.transport.abort()
            return
        try:
            sreader, swriter = await asyncio.open_connection("127.0.0.1", self.target)
        except OSError:
            cwriter.transport.abort()
            return
        pair = (cwriter, swriter)
        self.conns.add(pair)
        try:
            await asyncio.gather(self._pipe(creader, swriter), self._pipe(sreader, cwriter))
        finally:
            self.conns.discard(pair)
            for w in pair:
                w.transport.abort()

    def _abort_all(self):
        for pair in list(self.conns):
            for w in pair:
                w.transport.abort()

    def cut(self, on):
        def apply():
            self.cut_ = on
            if on:
                self._abort_all()
        self.loop.call_soon_threadsafe(apply)

    def delay(self, seconds):
        self.loop.call_soon_threadsafe(setattr, self, "latency", float(seconds))


class ProxySet:
    def __init__(self):
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="fault-proxies",
                                       daemon=True)
        self.thread.start()
        self.proxies = {}

    def add(self, name, listen, target):
        p = Proxy(self.loop, listen, target, name)
        asyncio.run_coroutine_threadsafe(p._start(), self.loop).result(10)
        self.proxies[name] = p
        return p

    def heal(self):
        for p in self.proxies.values():
            p.cut(False)
            p.delay(0)

    def close(self):
        async def shut():
            for p in self.proxies.values():
                p._abort_all()
                if p.server is not None:
                    p.server.close()
        try:
            asyncio.run_coroutine_threadsafe(shut(), self.loop).result(10)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(10)
