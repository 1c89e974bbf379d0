'use strict'
// The host layer's guarantees, end to end through the Node binding (each is tested once in the
// core, in Rust; here that the binding keeps them): close with 2,000 commands in flight settles
// every promise (ClosedError where the command had not finished) before close() resolves; an
// event listener that closes its own client; a listener that throws (reported as an uncaught
// exception, later events still delivered); close racing with a kill -9 failover; a panic on a
// core thread rejects with InternalError, once, and the client goes on.

const { test } = require('node:test')
const assert = require('node:assert/strict')
const sr = require('..')
const { Client, ClosedError } = sr
const { startTopology, withDeadline, waitFor, closedPort, runChild } = require('./helpers')

/** A client whose sentinel never answers: commands wait for a primary until their deadline. */
async function unreachable(options = {}) {
  const port = await closedPort()
  return Client.open(`redis+sentinel://127.0.0.1:${port}/mymaster`, {
    queueSize: 20000,
    commandTimeoutMs: 60000,
    sentinelTimeoutMs: 100,
    retryBaseMs: 10,
    retryMaxMs: 20,
    ...options,
  })
}

/**
 * Records how each tracked command settled, and whether close() had been called when it started
 * (`inFlight`: the guarantee covers those) and had resolved when it settled (`afterClose`).
 */
function tracker() {
  const ops = []
  return {
    ops,
    closeCalled: false,
    closeResolved: false,
    track(promise) {
      const op = { settled: false, code: null, afterClose: false, inFlight: !this.closeCalled }
      ops.push(op)
      promise.then(
        () => {
          op.settled = true
          op.code = 'ok'
          op.afterClose = this.closeResolved
        },
        (e) => {
          op.settled = true
          op.code = (e && e.code) || String(e)
          op.error = e
          op.afterClose = this.closeResolved
        },
      )
    },
    /** The commands started before close() was called. */
    inFlight() {
      return this.ops.filter((o) => o.inFlight)
    },
    codes() {
      const counts = {}
      for (const o of this.inFlight()) counts[o.code] = (counts[o.code] || 0) + 1
      return counts
    },
  }
}

test('close with 2,000 commands waiting: every promise rejects with ClosedError before close resolves', async () => {
  const c = await unreachable()
  const t = tracker()
  for (let i = 0; i < 2000; i++) t.track(c.execute(['GET', `host:k:${i}`]))
  // Let them reach the core's queue.
  await new Promise((r) => setTimeout(r, 50))
  assert.ok(t.ops.every((o) => !o.settled), 'all still waiting for a primary')
  t.closeCalled = true
  await withDeadline(c.close(), 15000, 'close')
  t.closeResolved = true
  assert.deepEqual(t.codes(), { closed: 2000 })
  assert.ok(t.ops.every((o) => o.error instanceof ClosedError))
  assert.equal(t.ops.filter((o) => o.afterClose).length, 0, 'none settled after close resolved')
  await assert.rejects(c.execute(['PING']), ClosedError)
})

test('close with 2,000 commands in flight on a live client: each settles once, before close resolves', async () => {
  const topo = await startTopology()
  try {
    const c = await Client.connect(topo.url, { decodeResponses: true })
    const t = tracker()
    for (let i = 0; i < 2000; i++) t.track(c.execute(['INCR', 'host:live']))
    // Some have completed, most are in flight or queued.
    await new Promise((r) => setImmediate(r))
    t.closeCalled = true
    await withDeadline(c.close(), 15000, 'close')
    t.closeResolved = true
    const codes = t.codes()
    assert.deepEqual(Object.keys(codes).filter((k) => k !== 'ok' && k !== 'closed'), [], JSON.stringify(codes))
    assert.equal(t.inFlight().filter((o) => !o.settled).length, 0, `settled when close resolved: ${JSON.stringify(codes)}`)
    assert.equal(t.inFlight().filter((o) => o.afterClose).length, 0)
    // What the server counted is at least what was acknowledged (closed ones may have run too).
    const check = await Client.connect(topo.url, { decodeResponses: true })
    const n = Number(await check.execute(['GET', 'host:live']))
    await check.close()
    assert.ok(n >= (codes.ok || 0) && n <= 2000, `counter ${n}, acknowledged ${codes.ok}`)
  } finally {
    await topo.down()
  }
})

test('an event listener that closes its own client: close resolves, nothing is emitted after', async () => {
  // Discovery fails every ~20 ms here, each round a discovery_failed event.
  const c = await unreachable()
  const t = tracker()
  for (let i = 0; i < 50; i++) t.track(c.execute(['GET', 'k']))
  let closing = null
  let eventsAfterClose = 0
  let listenerCalls = 0
  c.on('discovery_failed', (e) => {
    listenerCalls++
    assert.ok(e.error instanceof sr.SentinelRecoveryError)
    if (t.closeResolved) eventsAfterClose++
    if (closing === null) {
      t.closeCalled = true
      closing = c.close().then(() => {
        t.closeResolved = true
      })
    }
  })
  await waitFor(() => closing !== null, 15000, 'a discovery_failed event')
  await withDeadline(closing, 15000, 'close called from the listener')
  assert.equal(c.closed, true)
  assert.deepEqual(t.codes(), { closed: 50 })
  assert.equal(t.ops.filter((o) => o.afterClose).length, 0)
  // Several discovery rounds' worth of time: none of their events reaches the listener.
  const calls = listenerCalls
  await new Promise((r) => setTimeout(r, 300))
  assert.equal(eventsAfterClose, 0)
  assert.equal(listenerCalls, calls, 'no event after close resolved')
})

test('a listener that throws: reported as an uncaught exception, later events still delivered', async () => {
  // In a child process, whose uncaughtException listener plays the application's.
  const port = await closedPort()
  const code = `
    const { Client } = require(process.env.SR_MODULE)
    let thrown = 0
    process.on('uncaughtException', (e) => {
      if (e.message === 'listener failure') thrown++
      else throw e
    })
    const c = Client.open('redis+sentinel://127.0.0.1:${port}/mymaster', {
      sentinelTimeoutMs: 100, retryBaseMs: 10, retryMaxMs: 20, commandTimeoutMs: 60000,
    })
    let events = 0
    c.on('discovery_failed', () => {
      events++
      throw new Error('listener failure')
    })
    // A command pending meanwhile still settles (after the throws), with ClosedError.
    const pending = c.execute(['GET', 'k']).then(() => 'ok', (e) => e.name)
    const timer = setInterval(async () => {
      if (events < 5) return
      clearInterval(timer)
      await c.close()
      const after = events
      await new Promise((r) => setTimeout(r, 200))
      console.log(JSON.stringify({ events, thrown, after, pending: await pending }))
    }, 10)
  `
  const r = await runChild(code)
  assert.equal(r.code, 0, r.stderr)
  const out = JSON.parse(r.stdout.trim())
  assert.ok(out.events >= 5, JSON.stringify(out))
  assert.equal(out.thrown, out.after, 'every throw reported once')
  assert.equal(out.events, out.after, 'no event after close resolved')
  assert.equal(out.pending, 'ClosedError')
})

test('close racing with a kill -9 failover: every close resolves, each after all its commands settled', async () => {
  const topo = await startTopology()
  const delays = [0, 5, 50, 300, 1500]
  const clients = []
  try {
    for (let i = 0; i < delays.length; i++) {
      clients.push(await Client.connect(topo.url, { commandTimeoutMs: 5000 }))
    }
    const state = clients.map(() => ({ t: tracker(), events: 0, eventsAfterClose: 0, stop: false }))
    clients.forEach((c, i) => {
      c.on('event', () => {
        state[i].events++
        if (state[i].t.closeResolved) state[i].eventsAfterClose++
      })
    })
    let acked = 0
    const writers = []
    clients.forEach((c, i) => {
      for (let w = 0; w < 8; w++) {
        writers.push(
          (async () => {
            while (!state[i].stop) {
              const p = c.execute(['INCR', `host:race:${i}`])
              state[i].t.track(p)
              try {
                await p
                acked++
              } catch (e) {
                if (e instanceof ClosedError) return
                await new Promise((r) => setTimeout(r, 5))
              }
            }
          })(),
        )
      }
    })
    await waitFor(() => acked > 500, 15000, 'writes before the kill')
    assert.equal((await topo.cmd(`kill9 ${topo.info.primary.port}`)).ok, true)
    const killed = Date.now()
    const closes = clients.map(async (c, i) => {
      await new Promise((r) => setTimeout(r, delays[i]))
      state[i].t.closeCalled = true
      await withDeadline(c.close(), 15000, `close ${delays[i]} ms after the kill`)
      state[i].t.closeResolved = true
      state[i].stop = true
      // Settled before close resolved: anything still pending now would have settled after it.
      return { unsettled: state[i].t.inFlight().filter((o) => !o.settled).length, at: Date.now() - killed }
    })
    const results = await Promise.all(closes)
    await withDeadline(Promise.all(writers), 15000, 'writers to stop')
    await new Promise((r) => setTimeout(r, 200))
    state.forEach((s, i) => {
      const codes = s.t.codes()
      assert.equal(results[i].unsettled, 0, `client ${i} (close at +${delays[i]} ms): ${JSON.stringify(codes)}`)
      assert.equal(s.t.inFlight().filter((o) => o.afterClose).length, 0, `client ${i}: settled after close`)
      const unexpected = Object.keys(codes).filter((k) => !['ok', 'closed', 'timeout', 'connection_lost'].includes(k))
      assert.deepEqual(unexpected, [], `client ${i}: ${JSON.stringify(codes)}`)
      assert.equal(s.eventsAfterClose, 0, `client ${i}: event after close`)
    })
  } finally {
    await Promise.all(clients.map((c) => c.close()))
    await topo.down()
  }
})

test('a panic on a core thread rejects with InternalError, once, and the client goes on', async () => {
  const c = await unreachable({ commandTimeoutMs: 200 })
  await assert.rejects(
    c._op((op) => c._native.panicForTest(op)),
    (e) => {
      assert.ok(e instanceof sr.InternalError, `${e.name}: ${e.message}`)
      assert.equal(e.code, 'internal')
      assert.match(e.message, /a test panic/)
      return true
    },
  )
  // Still answering: with no primary to be found, with that error, not a panic.
  await assert.rejects(c.execute(['GET', 'k']), (e) => e.code !== 'internal')
  await c.close()
})
