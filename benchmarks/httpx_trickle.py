"""Does httpx's timeout bound a whole request? A server that trickles a byte per 0.25 s (issue 49 item 7:
why the LLM client keeps its own deadline). Run: python benchmarks/httpx_trickle.py"""
import socket, threading, time, httpx
srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen()
port = srv.getsockname()[1]
def serve():
    c, _ = srv.accept(); c.recv(65536)
    c.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 40\r\n\r\n")
    for _ in range(40):
        try: c.sendall(b" "); time.sleep(0.25)
        except OSError: break
    c.close()
threading.Thread(target=serve, daemon=True).start()
t = time.monotonic()
try:
    r = httpx.post(f"http://127.0.0.1:{port}/v1/chat/completions", json={}, timeout=2.0)
    print("httpx finished", r.status_code, len(r.content))
except Exception as e:
    print("httpx raised", type(e).__name__)
print(f"httpx timeout=2.0 took {time.monotonic()-t:.1f} s against a 1-byte-per-0.25-s reply; version {httpx.__version__}")
