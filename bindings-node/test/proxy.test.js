'use strict'
// startProxy(): the core's fencing proxy in this process, with clients nobody here wrote
// (ioredis and node-redis in plain standalone mode) pointed at proxy.url: commands, MULTI/EXEC
// and pub/sub; acknowledged writes through a planned SENTINEL FAILOVER (none lost, none twice);
// a Unix socket; the proxy's lifetime (close with its grace, `await using`, keeping the process
// alive until closed, unref()); options and their errors, checked against the core's keys and
// the TypeScript declarations.

const { test } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const net = require('node:net')
const os = require('node:os')
const path = require('node:path')
const { spawn } = require('node:child_process')
const { performance } = require('node:perf_hooks')
const Redis = require('ioredis')
const { createClient } = require('redis')
const ts = require('typescript')
const native = require('../native.js')
const { startProxy, Proxy, ConfigError, ClosedError } = require('..')
const { startTopology, withDeadline, waitFor, closedPort } = require('./helpers')
const { startWriters, judge } = require('./workload')

const HOST = '127.0.0.1'

/** A URL whose sentinels are not there: a proxy for it starts, and holds what it is sent. */
async function nowhere() {
  return `redis+sentinel://${HOST}:${await closedPort()}/svc`
}

/** ioredis in standalone mode with nothing re-sent and no reconnect (as plain as it gets). */
function plainIORedis(target, extra = {}) {
  const r = new Redis(target, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null, ...extra })
  r.on('error', () => {})
  return r
}

/** A plain ioredis connection to one node, for reading what it holds. */
async function direct(port, fn) {
  const r = plainIORedis({ host: HOST, port })
  try {
    await r.connect()
    return await fn(r)
  } finally {
    r.disconnect()
  }
}

async function quitAll(...clients) {
  for (const c of clients) {
    if (c === undefined) continue
    try {
      await withDeadline(c.quit(), 5000, 'quit')
    } catch {
      c.disconnect()
    }
  }
}

/** Resolves with the first `event` of `emitter` whose arguments pass `pass`. */
function next(emitter, event, pass = () => true) {
  return new Promise((resolve) => {
    const on = (...args) => {
      if (!pass(...args)) return
      emitter.off(event, on)
      resolve(args)
    }
    emitter.on(event, on)
  })
}

/** A raw connection (`net.connect` options), once connected. */
function connected(options) {
  return new Promise((resolve, reject) => {
    const s = net.connect(options, () => resolve(s))
    s.once('error', reject)
  })
}

/** Sends one inline command on `s`; resolves with the first reply bytes as text. */
function call(s, line) {
  return new Promise((resolve, reject) => {
    s.once('data', (d) => resolve(String(d)))
    s.once('error', reject)
    s.write(line + '\r\n')
  })
}

/** `snake_case` -> `camelCase`. */
const camelCase = (key) => key.replace(/_([a-z])/g, (_, c) => c.toUpperCase())

test('ioredis and node-redis in standalone mode through proxy.url: commands, MULTI/EXEC, pub/sub', async () => {
  const topo = await startTopology()
  const primaryPort = topo.info.primary.port
  const proxy = await startProxy(topo.url)
  let io, ioSub, nr, nrSub
  try {
    assert.ok(proxy instanceof Proxy)
    assert.equal(proxy.host, HOST)
    assert.ok(proxy.port > 0)
    assert.equal(proxy.address, `${HOST}:${proxy.port}`)
    assert.equal(proxy.url, `redis://${HOST}:${proxy.port}`)
    assert.equal(proxy.path, undefined)
    assert.equal(proxy.closed, false)

    // ioredis: commands, a transaction, pub/sub.
    io = plainIORedis(proxy.url)
    await io.connect()
    assert.equal(await io.set('p:io', 'v1'), 'OK')
    assert.equal(await io.get('p:io'), 'v1')
    assert.deepEqual(await io.multi().set('p:tx', '1').incr('p:tx').get('p:tx').exec(), [
      [null, 'OK'],
      [null, 2],
      [null, '2'],
    ])
    ioSub = plainIORedis(proxy.url)
    await ioSub.connect()
    await ioSub.subscribe('p:news')
    const ioMessage = next(ioSub, 'message', (channel) => channel === 'p:news')
    assert.equal(await io.publish('p:news', 'hello ioredis'), 1)
    assert.deepEqual(await withDeadline(ioMessage, 5000, 'ioredis message'), ['p:news', 'hello ioredis'])

    // node-redis: commands, a transaction, pub/sub on a duplicate.
    nr = createClient({ url: proxy.url })
    nr.on('error', () => {})
    await nr.connect()
    assert.equal(await nr.set('p:nr', 'v2'), 'OK')
    assert.equal(await nr.get('p:nr'), 'v2')
    assert.equal(await nr.get('p:io'), 'v1', 'one primary behind both clients')
    assert.deepEqual(await nr.multi().set('p:tx2', '5').incrBy('p:tx2', 2).get('p:tx2').exec(), ['OK', 7, '7'])
    nrSub = nr.duplicate()
    nrSub.on('error', () => {})
    await nrSub.connect()
    const nrMessage = new Promise((resolve) => nrSub.subscribe('p:nr-news', (message, channel) => resolve([channel, message])))
    // SUBSCRIBE is confirmed once the server counts the subscriber.
    await waitFor(async () => Number((await nr.pubSubNumSub('p:nr-news'))['p:nr-news']) === 1, 5000, 'node-redis subscribed')
    assert.equal(await nr.publish('p:nr-news', 'hello node-redis'), 1)
    assert.deepEqual(await withDeadline(nrMessage, 5000, 'node-redis message'), ['p:nr-news', 'hello node-redis'])

    // It all ran on the primary.
    assert.deepEqual(await direct(primaryPort, (r) => r.mget('p:io', 'p:nr', 'p:tx', 'p:tx2')), ['v1', 'v2', '2', '7'])
    const stats = proxy.stats()
    assert.equal(stats.sessions_open, 4)
    assert.ok(stats.sessions_accepted >= 4, JSON.stringify(stats))
    assert.ok(stats.commands_forwarded >= 12, JSON.stringify(stats))
    assert.equal(stats.malformed_requests, 0)
  } finally {
    await quitAll(io, ioSub)
    for (const c of [nr, nrSub]) if (c?.isOpen) await c.quit().catch(() => c.destroy())
    await proxy.close({ graceMs: 1000 })
    await topo.down()
  }
})

test('planned SENTINEL FAILOVER under ioredis writers through the proxy: nothing acknowledged lost, nothing twice', async (t) => {
  const topo = await startTopology()
  const oldPort = topo.info.primary.port
  const proxy = await startProxy(topo.url, { holdMs: 10000 })
  // No retry, no offline queue, no resend of what was in flight: nothing ioredis does may write
  // an id twice; only the proxy stands between the writers and the failover.
  const plain = { maxRetriesPerRequest: 0, enableOfflineQueue: false, autoResendUnfulfilledCommands: false }
  let closes = 0
  const conns = [0, 1, 2].map(() => {
    const r = new Redis(proxy.url, { ...plain, lazyConnect: true })
    r.on('error', () => {})
    r.on('close', () => closes++)
    return r
  })
  const writers = []
  try {
    await Promise.all(conns.map((r) => r.connect()))
    conns.forEach((r, i) => writers.push(startWriters(r, `proxy:loss:${i}`, { writers: 3, prefix: `c${i}w` })))
    await waitFor(() => writers.every((w) => w.acked.size > 150), 15000, 'writes before the failover')
    const since = performance.now()
    const asked = await topo.cmd('failover')
    assert.equal(asked.ok, true, JSON.stringify(asked))
    const moved = await topo.cmd(`wait-primary-not ${oldPort} 30000`)
    assert.equal(moved.ok, true, JSON.stringify(moved))
    const switched = performance.now()
    // Every connection writes to the new primary through the proxy.
    await waitFor(() => writers.every((w) => w.ackedSince(switched) > 100), 20000, 'writes after the switch')
    await withDeadline(Promise.all(writers.map((w) => w.stop())), 30000, 'writers to stop')
    const lists = await direct(moved.port, (r) => Promise.all(conns.map((_, i) => r.lrange(`proxy:loss:${i}`, 0, -1))))
    const verdicts = lists.map((list, i) => judge(list, writers[i], since))
    t.diagnostic(`verdicts: ${JSON.stringify(verdicts)}`)
    t.diagnostic(`proxy stats: ${JSON.stringify(proxy.stats())}`)
    verdicts.forEach((v, i) => {
      assert.ok(v.acknowledged > 250, `connection ${i}: ${v.acknowledged} acknowledged`)
      assert.equal(v.lost, 0, `connection ${i}: an acknowledged id is missing on the new primary`)
      assert.equal(v.duplicates, 0, `connection ${i}: an id is there twice`)
      // The only failures are the proxy's own error replies: nothing else broke.
      for (const kind of Object.keys(v.errorKinds)) {
        assert.match(kind, /^(UNCERTAIN|FENCED) /, `connection ${i}: unexpected error ${kind}`)
      }
    })
    // The proxy moved the sessions; it did not close them.
    assert.equal(closes, 0, 'a connection to the proxy was closed')
    const stats = proxy.stats()
    assert.ok(stats.primary_changes >= 1, JSON.stringify(stats))
    assert.equal(stats.sessions_accepted, 3, JSON.stringify(stats))
    assert.equal(stats.sessions_open, 3, JSON.stringify(stats))
  } finally {
    await Promise.all(writers.map((w) => w.stop())).catch(() => {})
    await quitAll(...conns)
    await proxy.close()
    await topo.down()
  }
})

test('never waits for discovery: starts with no sentinel reachable and answers FENCED after holdMs', async () => {
  const proxy = await startProxy(await nowhere(), { holdMs: 100 })
  const s = await connected({ port: proxy.port, host: HOST })
  try {
    // (Not ioredis here: it takes a refused HELLO at connect as fatal.)
    assert.match(await withDeadline(call(s, 'SET k v'), 10000, 'SET'), /^-FENCED /)
    const stats = proxy.stats()
    assert.equal(stats.commands_forwarded, 0, 'nothing was sent anywhere')
    assert.ok(stats.held_expired >= 1, JSON.stringify(stats))
  } finally {
    s.destroy()
    await proxy.close({ graceMs: 0 })
  }
})

test('a Unix socket with the mode asked for, removed at close; close ends sessions within its grace', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sr-proxy-'))
  const socket = path.join(dir, 'proxy.sock')
  const proxy = await startProxy(await nowhere(), { listen: `unix:${socket}`, unixMode: 0o640, holdMs: 100 })
  let s
  try {
    assert.equal(proxy.path, socket)
    assert.equal(proxy.address, `unix:${socket}`)
    assert.equal(proxy.url, `unix://${socket}`)
    assert.equal(proxy.host, undefined)
    assert.equal(proxy.port, undefined)
    assert.equal(fs.statSync(socket).mode & 0o777, 0o640)
    s = await connected({ path: socket })
    assert.match(await withDeadline(call(s, 'GET k'), 10000, 'GET'), /^-FENCED /)
    assert.equal(proxy.stats().sessions_open, 1)

    // A connected, idle client does not hold the close up past its grace: its connection ends.
    const ended = new Promise((resolve) => s.once('close', resolve))
    await withDeadline(proxy.close({ graceMs: 100 }), 10000, 'close')
    await withDeadline(ended, 5000, "the client's connection to end")
    assert.equal(fs.existsSync(socket), false, 'the socket file is removed at close')
  } finally {
    s?.destroy()
    await proxy.close({ graceMs: 0 })
    fs.rmSync(dir, { recursive: true, force: true })
  }
})

test('close: idempotent, stats() then throw ClosedError, the port stops accepting; Symbol.asyncDispose closes', async () => {
  const proxy = await startProxy(await nowhere())
  const first = proxy.close({ graceMs: 0 })
  assert.equal(proxy.closed, true)
  assert.equal(proxy.close(), first, 'a second close gets the promise of the first')
  await withDeadline(first, 10000, 'close')
  assert.throws(() => proxy.stats(), (e) => e instanceof ClosedError && e.code === 'closed')
  await assert.rejects(
    new Promise((resolve, reject) => net.connect(proxy.port, HOST, resolve).on('error', reject)),
    { code: 'ECONNREFUSED' },
  )

  // With no session, a close does not wait out its grace.
  const idle = await startProxy(await nowhere())
  await withDeadline(idle.close({ graceMs: 600000 }), 10000, 'close of a proxy with no session')

  const disposed = await startProxy(await nowhere())
  assert.equal(typeof disposed[Symbol.asyncDispose], 'function')
  await withDeadline(disposed[Symbol.asyncDispose](), 10000, 'asyncDispose')
  assert.equal(disposed.closed, true)
  assert.throws(() => disposed.stats(), ClosedError)
})

test('bad options reject with ConfigError naming the key; a bad grace closes nothing', async () => {
  const url = await nowhere()
  for (const [options, names] of [
    [{ holdMs: 0 }, /hold_ms/],
    [{ hold_ms: 'soon' }, /hold_ms/],
    [{ maxClients: -1 }, /max_clients/],
    [{ route: 'replica' }, /route/],
    [{ listen: 'localhost:0' }, /listen/],
    [{ listen: '10.0.0.1:0' }, /allow_remote/],
    [{ lendCredentials: 'yes' }, /lend_credentials/],
    [{ unixMode: 0o1000 }, /unix_mode/],
    [{ commandTimeoutMs: 'x' }, /command_timeout_ms/],
    [{ colour: 'blue' }, /colour/],
    [{ constructor: 'x' }, /constructor/],
    [{ decodeResponses: true }, /decode_responses/],
  ]) {
    await assert.rejects(startProxy(url, options), (e) => {
      assert.ok(e instanceof ConfigError, `${JSON.stringify(options)}: ${e}`)
      assert.equal(e.code, 'config')
      assert.match(e.message, names, JSON.stringify(options))
      return true
    })
  }
  await assert.rejects(startProxy('redis://127.0.0.1:6379'), ConfigError)
  await assert.rejects(startProxy(url, { addressMap: () => null }), { name: 'TypeError', message: /addressMap takes its text form/ })
  await assert.rejects(startProxy(42), TypeError)
  await assert.rejects(startProxy(url, null), TypeError)

  // A listen address already taken: the bind's failure.
  const taken = await startProxy(url)
  try {
    await assert.rejects(startProxy(url, { listen: taken.address }), (e) => e.code === 'config' && e.message.includes(taken.address))
    for (const graceMs of [-1, NaN, Infinity, 2 ** 31]) {
      await assert.rejects(taken.close({ graceMs }), (e) => e instanceof ConfigError && /graceMs/.test(e.message))
    }
    await assert.rejects(taken.close({ graceMs: '5' }), TypeError)
    await assert.rejects(taken.close({ grace: 5 }), { name: 'TypeError', message: /unknown close option 'grace'/ })
    assert.equal(taken.closed, false, 'a refused close closed nothing')
    assert.equal(taken.stats().sessions_open, 0)
  } finally {
    await taken.close({ graceMs: 0 })
  }
})

test('every core proxy key is taken in camelCase and declared in index.d.ts', async () => {
  const keys = native.proxyKeys()
  assert.ok(keys.includes('hold_ms') && keys.length >= 9, JSON.stringify(keys))
  // A bad value under the camelCase name reaches the core under its key (the error names it).
  const url = await nowhere()
  for (const key of keys) {
    await assert.rejects(startProxy(url, { [camelCase(key)]: '-1' }), (e) => e.code === 'config' && e.message.includes(key))
  }
  // Good values, given as JavaScript values, are taken.
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sr-proxy-'))
  try {
    const proxy = await startProxy(url, {
      listen: `unix:${path.join(dir, 's')}`,
      holdMs: 50,
      maxClients: 3,
      idleTimeoutMs: 0,
      maxRequestBytes: 4096,
      route: 'read',
      lendCredentials: true,
      allowRemote: false,
      unixMode: '600',
      commandTimeoutMs: 1000,
    })
    assert.equal(fs.statSync(proxy.path).mode & 0o777, 0o600)
    await proxy.close({ graceMs: 0 })
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }

  // index.d.ts declares each of them in ProxyOptions.
  const file = path.join(__dirname, '..', 'index.d.ts')
  const program = ts.createProgram([file], { strict: true, noEmit: true, types: ['node'] })
  const checker = program.getTypeChecker()
  const module = checker.getSymbolAtLocation(program.getSourceFile(file))
  const options = checker.getExportsOfModule(module).find((s) => s.name === 'ProxyOptions')
  assert.ok(options, 'index.d.ts exports ProxyOptions')
  const declared = checker.getDeclaredTypeOfSymbol(options).getProperties().map((p) => p.name)
  for (const key of keys) assert.ok(declared.includes(camelCase(key)), `ProxyOptions declares ${camelCase(key)}`)
})

/**
 * Runs `code` in a child node; resolves with {stdout, code} once it printed a line matching
 * `ready` (then `onReady(line, child)` runs) and exited, or rejects after `ms`.
 */
function child(code, ms, onReady = null) {
  return new Promise((resolve, reject) => {
    const c = spawn(process.execPath, ['-e', code], {
      env: { ...process.env, SR_MODULE: path.resolve(__dirname, '..') },
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    let stdout = ''
    let stderr = ''
    let fired = false
    c.stdout.on('data', (d) => {
      stdout += d
      const line = stdout.split('\n').find((l) => l.startsWith('url '))
      if (line && onReady && !fired) {
        fired = true
        onReady(line.slice(4), c).catch((e) => {
          c.kill('SIGKILL')
          reject(e)
        })
      }
    })
    c.stderr.on('data', (d) => (stderr += d))
    const timer = setTimeout(() => {
      c.kill('SIGKILL')
      reject(new Error(`child did not exit within ${ms} ms; stdout: ${stdout}; stderr: ${stderr}`))
    }, ms)
    c.on('exit', (code, signal) => {
      clearTimeout(timer)
      resolve({ code, signal, stdout, stderr })
    })
  })
}

test('a running proxy keeps the process alive until closed, as a server does; unref() lets it go', async () => {
  const url = await nowhere()
  // Nothing but the proxy (a signal listener does not keep a process alive): it serves until
  // the parent's signal closes it, then the process exits by itself.
  const served = await child(
    `const { startProxy } = require(process.env.SR_MODULE)
     startProxy(${JSON.stringify(url)}, { holdMs: 50 }).then((p) => {
       process.once('SIGUSR2', () => p.close({ graceMs: 0 }).then(() => console.log('closed')))
       console.log('url ' + p.port)
     })`,
    20000,
    async (port, c) => {
      const s = await connected({ port: Number(port), host: HOST })
      const reply = await call(s, 'PING')
      s.destroy()
      assert.match(reply, /^-FENCED /, 'the proxy still serves once the child has nothing else to do')
      c.kill('SIGUSR2')
    },
  )
  assert.equal(served.code, 0, served.stderr)
  assert.match(served.stdout, /^closed$/m)

  const unreferenced = await child(
    `const { startProxy } = require(process.env.SR_MODULE)
     startProxy(${JSON.stringify(url)}).then((p) => {
       p.unref().ref().unref()
       console.log('unreferenced ' + p.closed)
     })`,
    20000,
  )
  assert.equal(unreferenced.code, 0, unreferenced.stderr)
  assert.match(unreferenced.stdout, /^unreferenced false$/m)
})
