'use strict'
// Per-call options of execute (issue 13): `timeoutMs`, a deadline of its own, and `signal`, an
// AbortSignal that cancels the command (the promise rejects with an AbortError at once). Both on
// a command waiting for a primary and on one the server is running. Unknown options are refused
// rather than ignored.

const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const { getEventListeners } = require('node:events')
const sr = require('..')
const { Client } = sr
const { startTopology, withDeadline, closedPort } = require('./helpers')

let topo
before(async () => {
  topo = await startTopology()
})
after(async () => {
  await topo?.down()
})

/** A client whose sentinel never answers: commands wait for a primary until their deadline. */
async function unreachable() {
  const port = await closedPort()
  return Client.open(`redis+sentinel://127.0.0.1:${port}/mymaster`, {
    commandTimeoutMs: 60000,
    sentinelTimeoutMs: 100,
  })
}

function isAbort(reason) {
  return (e) => {
    assert.equal(e.name, 'AbortError', `${e && e.name}: ${e && e.message}`)
    assert.equal(e.code, 'ABORT_ERR')
    assert.ok(e instanceof sr.AbortError)
    assert.ok(!(e instanceof sr.SentinelRecoveryError), 'not one of the stable codes')
    assert.equal(e.cause, reason)
    return true
  }
}

test('timeoutMs: a command waiting for a primary times out at its own deadline', async () => {
  const c = await unreachable()
  try {
    const started = Date.now()
    await assert.rejects(withDeadline(c.execute(['GET', 'k'], { timeoutMs: 200 }), 10000, 'execute'), sr.TimeoutError)
    const took = Date.now() - started
    assert.ok(took >= 150 && took < 5000, `took ${took} ms`)
  } finally {
    await c.close()
  }
})

test('timeoutMs: a command the server is running times out; the connection still answers right', async () => {
  const c = await Client.connect(topo.url, { decodeResponses: true, commandTimeoutMs: 20000 })
  try {
    const started = Date.now()
    await assert.rejects(c.execute(['DEBUG', 'SLEEP', '1'], { timeoutMs: 200 }), sr.TimeoutError)
    assert.ok(Date.now() - started < 900, `took ${Date.now() - started} ms`)
    // The late reply of the timed-out command is not taken for another command's.
    assert.equal(await c.execute(['ECHO', 'after-timeout'], { timeoutMs: 5000 }), 'after-timeout')
    // A generous per-call deadline does not cut a slow command short.
    assert.equal(await c.execute(['DEBUG', 'SLEEP', '0.3'], { timeoutMs: 5000 }), 'OK')
  } finally {
    await c.close()
  }
})

test('signal: aborting a command waiting for a primary rejects it at once with AbortError', async () => {
  const c = await unreachable()
  try {
    const ac = new AbortController()
    const p = c.execute(['GET', 'k'], { signal: ac.signal })
    await new Promise((r) => setTimeout(r, 50))
    const reason = new Error('user went away')
    const started = Date.now()
    ac.abort(reason)
    await assert.rejects(withDeadline(p, 2000, 'aborted execute'), isAbort(reason))
    assert.ok(Date.now() - started < 1000)
    assert.equal(getEventListeners(ac.signal, 'abort').length, 0, 'listener removed')
    // The client goes on: other commands still wait for their own deadline.
    await assert.rejects(c.execute(['GET', 'k'], { timeoutMs: 100 }), sr.TimeoutError)
  } finally {
    await c.close()
  }
})

test('signal: aborting a command the server is running; later replies are not mixed up', async () => {
  const c = await Client.connect(topo.url, { decodeResponses: true, commandTimeoutMs: 20000 })
  try {
    const ac = new AbortController()
    const started = Date.now()
    const p = c.execute(['DEBUG', 'SLEEP', '1'], { signal: ac.signal })
    setTimeout(() => ac.abort(), 100)
    await assert.rejects(p, (e) => isAbort(ac.signal.reason)(e) && e.cause.name === 'AbortError')
    assert.ok(Date.now() - started < 900, `took ${Date.now() - started} ms`)
    const replies = await Promise.all(['a', 'b', 'c'].map((x) => c.execute(['ECHO', x])))
    assert.deepEqual(replies, ['a', 'b', 'c'])
  } finally {
    await c.close()
  }
})

test('signal: already aborted, nothing is sent; settled commands drop their listener', async () => {
  const c = await Client.connect(topo.url, { decodeResponses: true })
  try {
    await c.execute(['SET', 'options:k', 'before'])
    const ac = new AbortController()
    ac.abort('stop')
    await assert.rejects(c.execute(['SET', 'options:k', 'after'], { signal: ac.signal }), isAbort('stop'))
    assert.equal(await c.execute(['GET', 'options:k']), 'before')

    // One long-lived signal for many commands: each completion removes its listener, and an
    // abort after they completed changes nothing.
    const shared = new AbortController()
    const replies = await Promise.all(
      Array.from({ length: 100 }, (_, i) => c.execute(['ECHO', `m${i}`], { signal: shared.signal, timeoutMs: 5000 })),
    )
    assert.equal(replies[99], 'm99')
    assert.equal(getEventListeners(shared.signal, 'abort').length, 0)
    shared.abort()
    assert.equal(await c.execute(['ECHO', 'still'], { signal: undefined }), 'still')
  } finally {
    await c.close()
  }
})

test('options are checked: unknown keys, bad timeoutMs and a non-signal are refused', async () => {
  const c = await unreachable()
  try {
    await assert.rejects(c.execute(['GET', 'k'], { timeout: 5 }), (e) => e instanceof TypeError && /timeout/.test(e.message))
    await assert.rejects(c.execute(['GET', 'k'], 5), TypeError)
    // Out of range: the core's rule (tests/cases/timeouts.tsv); not a number: a TypeError.
    for (const bad of [0, -1, NaN, Infinity, 2 ** 31]) {
      await assert.rejects(c.execute(['GET', 'k'], { timeoutMs: bad }), sr.ConfigError, String(bad))
    }
    await assert.rejects(c.execute(['GET', 'k'], { timeoutMs: '100' }), TypeError)
    await assert.rejects(c.execute(['GET', 'k'], { signal: {} }), TypeError)
    // A transaction's timeoutMs (composite and begin) keeps the same rule.
    for (const bad of [0, -1, NaN, Infinity, 2 ** 31]) {
      await assert.rejects(c.transaction([['GET', 'k']], { timeoutMs: bad }), sr.ConfigError, String(bad))
      await assert.rejects(c.beginTransaction({ timeoutMs: bad }), sr.ConfigError, String(bad))
    }
    await assert.rejects(c.transaction([['GET', 'k']], { timeoutMs: '100' }), TypeError)
    await assert.rejects(c.beginTransaction({ timeoutMs: '100' }), TypeError)
    await assert.rejects(c.beginTransaction({ signal: new AbortController().signal }), TypeError)
    // null and undefined mean "not given": the client's 60 s deadline applies (cut short here by
    // closing the client).
    const p = assert.rejects(c.execute(['GET', 'k'], { timeoutMs: null, signal: null }), sr.ClosedError)
    await new Promise((r) => setTimeout(r, 100))
    await c.close()
    await p
  } finally {
    await c.close()
  }
})

test('signal: a transaction waiting for a primary is aborted at once; a bad signal or an aborted one sends nothing', async () => {
  const c = await unreachable()
  try {
    const ac = new AbortController()
    const p = c.transaction([['INCR', 'options:tx']], { watch: ['options:tx'], signal: ac.signal })
    await new Promise((r) => setTimeout(r, 50))
    const reason = new Error('request cancelled')
    const started = Date.now()
    ac.abort(reason)
    await assert.rejects(withDeadline(p, 2000, 'aborted transaction'), isAbort(reason))
    assert.ok(Date.now() - started < 1000)
    assert.equal(getEventListeners(ac.signal, 'abort').length, 0, 'listener removed')
    await assert.rejects(c.transaction([['INCR', 'options:tx']], { signal: {} }), TypeError)
    await assert.rejects(c.transaction([['INCR', 'options:tx']], { signl: ac.signal }), /expected watch, signal/)
    await assert.rejects(c.transaction([['INCR', 'options:tx']], { signal: ac.signal }), isAbort(reason))
  } finally {
    await c.close()
  }
  const live = await Client.connect(topo.url, { decodeResponses: true })
  try {
    await live.execute(['DEL', 'options:tx'])
    const done = new AbortController()
    assert.deepEqual(await live.transaction([['INCR', 'options:tx'], ['INCR', 'options:tx']], { signal: done.signal }), [1, 2])
    assert.equal(getEventListeners(done.signal, 'abort').length, 0, 'a settled transaction drops its listener')
    const aborted = new AbortController()
    aborted.abort('stop')
    await assert.rejects(live.transaction([['INCR', 'options:tx']], { signal: aborted.signal }), isAbort('stop'))
    assert.equal(await live.execute(['GET', 'options:tx']), '2', 'nothing sent for the aborted one')
  } finally {
    await live.close()
  }
})
