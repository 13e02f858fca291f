"""Serving the VIZ page on 127.0.0.1: a free port unless one is asked for, the page built once per request of `/`
(so a page served from a running program shows what was noted up to the reload)."""
from __future__ import annotations
import http.server, threading
from typing import Any
from tinycore.viz.page import render_page

class _Handler(http.server.BaseHTTPRequestHandler):
  def do_GET(self) -> None:
    if self.path.split("#")[0] not in ("/", "/index.html"):
      self.send_error(404, "the VIZ page is at /")
      return
    body = render_page().encode()
    self.send_response(200)
    self.send_header("Content-Type", "text/html; charset=utf-8")
    self.send_header("Content-Length", str(len(body)))
    self.end_headers()
    self.wfile.write(body)
  def log_message(self, *args: Any) -> None: pass  # a line per request would bury the program's own output

def serve_page(port: int = 0, block: bool = True) -> str:
  """Start the server and print its URL; block=True serves until Ctrl-C, else a daemon thread serves. Returns the URL."""
  # (blocking, one request at a time: at the interpreter's exit, where serve() runs under VIZ=1, no new thread may be wanted)
  server = (http.server.HTTPServer if block else http.server.ThreadingHTTPServer)(("127.0.0.1", port), _Handler)
  url = f"http://127.0.0.1:{server.server_address[1]}/"
  print(f"VIZ: the page is at {url}" + (" (Ctrl-C to stop)" if block else ""), flush=True)
  if not block:
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return url
  try: server.serve_forever()
  except KeyboardInterrupt: pass
  finally: server.server_close()
  return url
