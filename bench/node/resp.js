'use strict'
// A minimal RESP2 client on node:net for the benchmarks' own measurements (sentinel INFO, the
// +switch-master subscription), so that no client library under test is involved in measuring.
const net = require('node:net')

/** Parses one RESP2 value at `at`; returns [value, next] or null when incomplete. */
function parse(buf, at) {
  if (at >= buf.length) return null
  const nl = buf.indexOf('\r\n', at)
  if (nl < 0) return null
  const type = buf[at]
  const line = buf.toString('latin1', at + 1, nl)
  switch (type) {
    case 0x2b: // +
      return [line, nl + 2]
    case 0x2d: // -
      return [new Error(line), nl + 2]
    case 0x3a: // :
      return [Number(line), nl + 2]
    case 0x24: {
      // $
      const len = Number(line)
      if (len < 0) return [null, nl + 2]
      if (buf.length < nl + 2 + len + 2) return null
      return [buf.toString('utf8', nl + 2, nl + 2 + len), nl + 2 + len + 2]
    }
    case 0x2a: {
      // *
      const n = Number(line)
      if (n < 0) return [null, nl + 2]
      const out = []
      let p = nl + 2
      for (let i = 0; i < n; i++) {
        const r = parse(buf, p)
        if (r === null) return null
        out.push(r[0])
        p = r[1]
      }
      return [out, p]
    }
    default:
      throw new Error(`RESP: unexpected type byte ${type}`)
  }
}

function encode(args) {
  let s = `*${args.length}\r\n`
  for (const a of args) {
    const v = String(a)
    s += `$${Buffer.byteLength(v)}\r\n${v}\r\n`
  }
  return s
}

/**
 * Connects to host:port. Resolves with {command(args) → Promise, onPush(fn), close()}.
 * In subscribe mode, every array whose first element is 'message' goes to the push listener with
 * the time it was parsed (performance.now()).
 */
function connect(port, host = '127.0.0.1') {
  return new Promise((resolve, reject) => {
    const socket = net.connect({ port, host })
    socket.setNoDelay(true)
    const pending = []
    let pushListener = null
    let buf = Buffer.alloc(0)
    socket.on('data', (chunk) => {
      const now = performance.now()
      buf = buf.length ? Buffer.concat([buf, chunk]) : chunk
      let at = 0
      for (;;) {
        const r = parse(buf, at)
        if (r === null) break
        at = r[1]
        const v = r[0]
        if (Array.isArray(v) && v[0] === 'message' && pushListener) pushListener(v, now)
        else {
          const p = pending.shift()
          if (p) (v instanceof Error ? p.reject : p.resolve)(v)
        }
      }
      buf = buf.subarray(at)
    })
    socket.on('error', (e) => {
      for (const p of pending.splice(0)) p.reject(e)
      reject(e)
    })
    socket.on('close', () => {
      for (const p of pending.splice(0)) p.reject(new Error('closed'))
    })
    socket.once('connect', () =>
      resolve({
        command: (args) =>
          new Promise((res, rej) => {
            pending.push({ resolve: res, reject: rej })
            socket.write(encode(args))
          }),
        onPush: (fn) => {
          pushListener = fn
        },
        close: () => socket.destroy(),
      }),
    )
  })
}

/** INFO text → {field: value}. */
function infoFields(text) {
  const out = {}
  for (const line of text.split('\r\n')) {
    const i = line.indexOf(':')
    if (i > 0 && line[0] !== '#') out[line.slice(0, i)] = line.slice(i + 1)
  }
  return out
}

module.exports = { connect, infoFields }
