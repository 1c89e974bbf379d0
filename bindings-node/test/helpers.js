'use strict'
// Shared helpers of the node:test suite: real topologies through the testkit's `sr-topology`,
// a fake sentinel for replies real servers can't be made to give, and polling with deadlines.

const { spawn, spawnSync } = require('node:child_process')
const fs = require('node:fs')
const net = require('node:net')
const path = require('node:path')
const readline = require('node:readline')

const ROOT = path.resolve(__dirname, '..', '..')
const TARGET = process.env.CARGO_TARGET_DIR || path.join(ROOT, 'target')

/** Path of sr-topology, built on first use if missing. */
function topologyBinary() {
  const bin = process.env.SR_TOPOLOGY || path.join(TARGET, 'debug', 'sr-topology')
  if (!fs.existsSync(bin)) {
    const r = spawnSync('cargo', ['build', '-p', 'sentinel-recovery-testkit', '--bins'], {
      cwd: ROOT,
      stdio: 'inherit',
      env: { ...process.env, CARGO_TARGET_DIR: TARGET },
    })
    if (r.status !== 0) throw new Error('building sr-topology failed')
  }
  return bin
}

/**
 * Starts `sr-topology up --json ARGS`; resolves with {info, url, cmd(line), down()}.
 * `cmd` sends one control line and resolves with its JSON answer. Always call `down()`.
 */
async function startTopology(args = []) {
  const child = spawn(topologyBinary(), ['up', '--json', ...args], {
    stdio: ['pipe', 'pipe', 'inherit'],
  })
  const lines = readline.createInterface({ input: child.stdout })
  const waiting = []
  const queued = []
  lines.on('line', (line) => {
    const w = waiting.shift()
    if (w) w.resolve(line)
    else queued.push(line)
  })
  const exited = new Promise((resolve) => child.once('exit', resolve))
  exited.then(() => {
    for (const w of waiting.splice(0)) w.reject(new Error('sr-topology exited'))
  })
  const nextLine = () =>
    queued.length > 0
      ? Promise.resolve(queued.shift())
      : new Promise((resolve, reject) => waiting.push({ resolve, reject }))
  let info
  try {
    info = JSON.parse(await withDeadline(nextLine(), 60000, 'sr-topology start'))
  } catch (e) {
    child.kill('SIGTERM')
    throw e
  }
  let chain = Promise.resolve()
  const cmd = (line) => {
    const run = chain.then(async () => {
      child.stdin.write(line + '\n')
      return JSON.parse(await withDeadline(nextLine(), 60000, `sr-topology ${line}`))
    })
    chain = run.catch(() => {})
    return run
  }
  const down = async () => {
    if (child.exitCode === null) {
      child.stdin.end()
      const timer = setTimeout(() => child.kill('SIGTERM'), 20000)
      await exited
      clearTimeout(timer)
    }
  }
  return { info, url: info.url, cmd, down, child }
}

/**
 * Runs `code` in a child node with `env` added to this process's environment (`SR_MODULE` is
 * always the binding under test); resolves {code, signal, stdout, stderr}, or kills it and
 * rejects after `ms`.
 */
function runChild(code, env = {}, ms = 20000) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['-e', code], {
      env: { ...process.env, SR_MODULE: path.resolve(__dirname, '..'), ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (d) => (stdout += d))
    child.stderr.on('data', (d) => (stderr += d))
    const timer = setTimeout(() => {
      child.kill('SIGKILL')
      reject(new Error(`child did not exit within ${ms} ms; stdout: ${stdout}; stderr: ${stderr}`))
    }, ms)
    child.on('exit', (code, signal) => {
      clearTimeout(timer)
      resolve({ code, signal, stdout, stderr })
    })
  })
}

/** Rejects with a clear message when `promise` has not settled within `ms`. */
function withDeadline(promise, ms, what) {
  let timer
  const deadline = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: no result within ${ms} ms`)), ms)
  })
  return Promise.race([promise, deadline]).finally(() => clearTimeout(timer))
}

/** Polls `check` (sync or async) every `every` ms until it returns a truthy value or `ms` pass. */
async function waitFor(check, ms, what, every = 25) {
  const end = Date.now() + ms
  for (;;) {
    const v = await check()
    if (v) return v
    if (Date.now() > end) throw new Error(`${what}: not reached within ${ms} ms`)
    await new Promise((r) => setTimeout(r, every))
  }
}

/** A loopback port with nothing listening (bound, then closed). */
async function closedPort() {
  const server = net.createServer()
  await new Promise((r) => server.listen(0, '127.0.0.1', r))
  const { port } = server.address()
  await new Promise((r) => server.close(r))
  return port
}

/** RESP2 encoding of a reply: strings as bulk, arrays, `{error}` as error replies. */
function encode(v) {
  if (v === null) return '$-1\r\n'
  if (Array.isArray(v)) return `*${v.length}\r\n` + v.map(encode).join('')
  if (typeof v === 'object' && v.error) return `-${v.error}\r\n`
  const s = String(v)
  return `$${Buffer.byteLength(s)}\r\n${s}\r\n`
}

/** Parses complete RESP2 commands (arrays of bulk strings) off `buf`; returns [commands, rest]. */
function parseCommands(buf) {
  const commands = []
  let at = 0
  outer: while (at < buf.length) {
    if (buf[at] !== 0x2a) return [commands, Buffer.alloc(0)] // not an array: drop (inline unsupported)
    let nl = buf.indexOf('\r\n', at)
    if (nl < 0) break
    const n = Number(buf.toString('latin1', at + 1, nl))
    let p = nl + 2
    const args = []
    for (let i = 0; i < n; i++) {
      nl = buf.indexOf('\r\n', p)
      if (nl < 0) break outer
      const len = Number(buf.toString('latin1', p + 1, nl))
      if (buf.length < nl + 2 + len + 2) break outer
      args.push(buf.toString('utf8', nl + 2, nl + 2 + len))
      p = nl + 2 + len + 2
    }
    commands.push(args)
    at = p
  }
  return [commands, buf.subarray(at)]
}

/**
 * A fake sentinel on loopback answering with `reply(args)` (a value for `encode`, or undefined
 * for an ERR). Resolves with {port, close(), seen: [[...args]]}.
 */
async function fakeSentinel(reply) {
  const seen = []
  const sockets = new Set()
  const server = net.createServer((socket) => {
    sockets.add(socket)
    socket.on('close', () => sockets.delete(socket))
    socket.on('error', () => {})
    let pending = Buffer.alloc(0)
    socket.on('data', (chunk) => {
      const [commands, rest] = parseCommands(Buffer.concat([pending, chunk]))
      pending = rest
      for (const args of commands) {
        seen.push(args)
        const r = reply(args)
        socket.write(encode(r === undefined ? { error: `ERR unknown command '${args[0]}'` } : r))
      }
    })
  })
  await new Promise((r) => server.listen(0, '127.0.0.1', r))
  return {
    port: server.address().port,
    seen,
    close: () =>
      new Promise((r) => {
        for (const s of sockets) s.destroy()
        server.close(r)
      }),
  }
}

/**
 * The rows of a shared cases file (`tests/cases/NAME`, which every binding's suite reads): its
 * lines that are neither blank nor comments, split at tabs, each with `fields` fields, and at
 * least `atLeast` of them.
 */
function caseRows(name, fields, atLeast) {
  const file = path.join(ROOT, 'tests', 'cases', name)
  const rows = fs
    .readFileSync(file, 'utf8')
    .split('\n')
    .filter((l) => l.trim() !== '' && !l.startsWith('#'))
    .map((line) => {
      const row = line.split('\t')
      if (row.length !== fields) throw new Error(`${file}: ${fields} tab-separated fields in ${JSON.stringify(line)}`)
      return row
    })
  if (rows.length < atLeast) throw new Error(`${file}: ${rows.length} cases`)
  return rows
}

module.exports = {
  caseRows,
  startTopology,
  withDeadline,
  waitFor,
  closedPort,
  fakeSentinel,
  runChild,
  ROOT,
  TARGET,
}
