// Loopback names and addresses: where the server warns (bound beyond loopback without auth) and
// what it answers when bound to loopback (the Host rule against DNS rebinding). No dependencies:
// the CLI loads it too.

/** Whether a bind host (or an address the server is bound to) is a loopback one. */
export function isLoopback(host: string): boolean {
  return host === 'localhost' || host === '::1' || host === '[::1]' || /^127\.\d+\.\d+\.\d+$/.test(host);
}

/** Whether a Host header names a loopback host: localhost (and *.localhost), 127.0.0.0/8 or [::1], any port. */
export function isLoopbackHostHeader(header: string): boolean {
  let host = header.trim().toLowerCase();
  if (host.startsWith('[')) return /^\[::1\](:\d*)?$/.test(host);
  const colon = host.lastIndexOf(':');
  if (colon >= 0) host = host.slice(0, colon);
  if (host.endsWith('.')) host = host.slice(0, -1);
  return host === 'localhost' || host.endsWith('.localhost') || /^127\.\d+\.\d+\.\d+$/.test(host);
}
