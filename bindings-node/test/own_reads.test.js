'use strict'
// Replies read on the JavaScript thread (src/own_replies.rs): a command sent on an idle connection,
// and every command sent on it while such replies are due, has its reply read by the JavaScript
// thread's own loop, not handed over by a core thread. These
// tests pin what must hold whichever thread reads: each command gets its own reply, a deadline
// still ends the wait (and the late reply never reaches another command), close still settles
// everything, and a worker ending with such a read open leaves no libuv handle behind.

const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const { Client } = require('..')
const native = require('../native.js')
const { startTopology, withDeadline, runChild } = require('./helpers')

let topo
before(async () => {
  topo = await startTopology(['--replicas', '0', '--sentinels', '1'])
})
after(async () => {
  await topo?.down()
})

test('one command at a time: every reply is read on this thread and is its own', async () => {
  const c = await Client.connect(topo.url, { decodeResponses: true })
  try {
    await c.execute(['SET', 'own:warm', 'x'])
    const before = native.repliesReadHereForTest()
    for (let i = 0; i < 200; i++) {
      assert.equal(await c.execute(['SET', `own:${i}`, `v${i}`]), 'OK')
      assert.equal(await c.execute(['GET', `own:${i}`]), `v${i}`)
    }
    assert.equal(native.repliesReadHereForTest() - before, 400)
    // Many at once: the first goes to the idle connection and the others join it, so this
    // thread reads every reply, each its own.
    const many = native.repliesReadHereForTest()
    const got = await Promise.all(Array.from({ length: 64 }, (_, i) => c.execute(['GET', `own:${i}`])))
    assert.deepEqual(got, Array.from({ length: 64 }, (_, i) => `v${i}`))
    assert.equal(native.repliesReadHereForTest() - many, 64)
    // Kept at 64 in flight, each reply sending the next command (written together once the
    // replies read at once were delivered): still every reply read here, each its own.
    const steady = native.repliesReadHereForTest()
    let sent = 0
    const chain = async () => {
      while (sent < 2000) {
        const i = sent++
        assert.equal(await c.execute(['GET', `own:${i % 200}`]), `v${i % 200}`)
      }
    }
    await Promise.all(Array.from({ length: 64 }, chain))
    assert.equal(native.repliesReadHereForTest() - steady, 2000)
    // A command sent while a watched reply is due (its server is busy 200 ms) joins it: both
    // replies are read here. A pipeline sent meanwhile hands the watch back: the core reads both.
    const sentMeanwhile = [
      [() => c.execute(['GET', 'own:1']), 'v1', 2],
      [() => c.pipeline([['GET', 'own:1'], ['GET', 'own:2']]), ['v1', 'v2'], 0],
    ]
    for (const [send, expected, readHere] of sentMeanwhile) {
      const busy = native.repliesReadHereForTest()
      const slow = c.execute(['DEBUG', 'SLEEP', '0.2'])
      const next = send()
      assert.equal(await slow, 'OK')
      assert.deepEqual(await next, expected)
      assert.equal(native.repliesReadHereForTest() - busy, readHere, `${expected}: replies read on this thread`)
    }
  } finally {
    await c.close()
  }
})

test('64 in flight, mixed with pipelines, aborts, deadlines and other kinds: each reply its own', async () => {
  // The commands in flight join the replies read here, while other operations hand them back to
  // the core and a blocking pop goes to a connection of its own: every reply must still reach the
  // command it answers, whichever thread reads it. Choices from a seeded generator.
  const c = await Client.connect(topo.url, { decodeResponses: true })
  try {
    await c.pipeline(Array.from({ length: 64 }, (_, w) => ['SET', `own:mix:${w}`, `m${w}`]))
    let seed = 12345
    const next = () => (seed = (seed * 1103515245 + 12345) % 2147483648) % 100
    const worker = async (w) => {
      const key = `own:mix:${w}`
      for (let i = 0; i < 60; i++) {
        const pick = next()
        if (pick < 55) {
          assert.equal(await c.execute(['GET', key]), `m${w}`)
        } else if (pick < 70) {
          assert.equal(await c.execute(['INCR', `own:mix:n:${w}`], { timeoutMs: 5000 }), ++incrs[w])
        } else if (pick < 80) {
          assert.deepEqual(await c.pipeline([['GET', key], ['ECHO', `p${w}:${i}`]]), [`m${w}`, `p${w}:${i}`])
        } else if (pick < 90) {
          // Aborted right after it was sent: its reply (read here or not) must not reach
          // another command; either outcome is the command's own.
          const ac = new AbortController()
          const sent = c.execute(['ECHO', `a${w}:${i}`], { signal: ac.signal })
          ac.abort()
          try {
            assert.equal(await sent, `a${w}:${i}`)
          } catch (e) {
            assert.equal(e.name, 'AbortError')
          }
        } else if (pick < 95) {
          assert.equal(await c.execute(['BLPOP', `own:mix:list:${w}`, '0.01']), null)
        } else {
          assert.equal(await c.execute(['ECHO', `e${w}:${i}`]), `e${w}:${i}`)
        }
      }
    }
    const incrs = new Array(64).fill(0)
    await Promise.all(Array.from({ length: 64 }, (_, w) => worker(w)))
    // Each worker's INCRs counted its own increments, in order.
    const counts = await c.pipeline(Array.from({ length: 64 }, (_, w) => ['GET', `own:mix:n:${w}`]))
    counts.forEach((n, w) => assert.equal(Number(n ?? 0), incrs[w], `worker ${w}`))
  } finally {
    await c.close()
  }
})

test('small Buffer replies read here share a slab and stay whole, each its own', async () => {
  // Buffer replies up to 4 KiB read on this thread are views of a shared 8 KiB ArrayBuffer
  // (src/buffer_slab.rs); larger ones have their own.
  const c = await Client.connect(topo.url)
  try {
    const value = (i) => Buffer.from(`${i}:`.padEnd(97 + (i % 13), String.fromCharCode(97 + (i % 26))))
    await c.pipeline(Array.from({ length: 400 }, (_, i) => ['SET', `own:buf:${i}`, value(i)]))
    const before = native.repliesReadHereForTest()
    const got = []
    for (let i = 0; i < 400; i++) got.push(await c.execute(['GET', `own:buf:${i}`]))
    assert.equal(native.repliesReadHereForTest() - before, 400)
    assert.ok(got.every((b) => Buffer.isBuffer(b)))
    // About 80 replies to a slab: several slabs, views of them, none overlapping another.
    assert.ok(new Set(got.map((b) => b.buffer)).size >= 4)
    assert.ok(got.some((b) => b.byteOffset > 0))
    got[1].fill(0)
    got.forEach((b, i) => assert.deepEqual(b, i === 1 ? Buffer.alloc(value(1).length) : value(i), `reply ${i}`))
    // At and past the largest pooled size, empty, and nil.
    for (const n of [4095, 4096, 4097, 20000]) {
      await c.execute(['SET', 'own:buf:n', Buffer.alloc(n, 7)])
      assert.deepEqual(await c.execute(['GET', 'own:buf:n']), Buffer.alloc(n, 7), `${n} bytes`)
    }
    await c.execute(['SET', 'own:buf:empty', ''])
    assert.deepEqual(await c.execute(['GET', 'own:buf:empty']), Buffer.alloc(0))
    assert.equal(await c.execute(['GET', 'own:buf:none']), null)
    // Code that detaches the slab (transfers it away) gets no write into it: the next reply
    // goes to a new slab.
    const last = await c.execute(['GET', 'own:buf:5'])
    const slab = last.buffer
    structuredClone(slab, { transfer: [slab] })
    assert.equal(last.length, 0)
    for (let i = 0; i < 5; i++) assert.deepEqual(await c.execute(['GET', `own:buf:${i}`]), value(i))
    assert.notEqual((await c.execute(['GET', 'own:buf:6'])).buffer, slab)
  } finally {
    await c.close()
  }
})

test('a deadline ends the wait on a paused primary; its late reply reaches no other command', async () => {
  const port = topo.info.primary.port
  const c = await Client.connect(topo.url, { decodeResponses: true })
  try {
    await c.execute(['SET', 'own:a', 'a'])
    await c.execute(['SET', 'own:b', 'b'])
    assert.equal((await topo.cmd(`stop ${port}`)).ok, true)
    let resumed = false
    try {
      const started = Date.now()
      // Sent on the idle connection, so this thread watches for its reply.
      const a = c.execute(['GET', 'own:a'], { timeoutMs: 300 })
      await assert.rejects(a, (e) => e.code === 'timeout')
      assert.ok(Date.now() - started < 2000, 'the deadline ended the wait')
      // Sent while a's reply is still due: queued behind it on the same connection.
      const b = c.execute(['GET', 'own:b'], { timeoutMs: 10000 })
      assert.equal((await topo.cmd(`cont ${port}`)).ok, true)
      resumed = true
      assert.equal(await withDeadline(b, 15000, 'GET own:b'), 'b')
    } finally {
      if (!resumed) await topo.cmd(`cont ${port}`)
    }
    // Idle again: read on this thread again, each its own.
    const before = native.repliesReadHereForTest()
    assert.equal(await c.execute(['GET', 'own:a']), 'a')
    assert.equal(await c.execute(['GET', 'own:b']), 'b')
    assert.equal(native.repliesReadHereForTest() - before, 2)
  } finally {
    await c.close()
  }
})

test('the server ending the connection this thread watches: the client reconnects and reads here again', async () => {
  // After a reply read here the client's poll handle stays on the socket. The server closing
  // that (idle) connection must reach the core, which reconnects; the next replies are read here
  // again, on the new socket, each its own.
  const c = await Client.connect(topo.url, { decodeResponses: true })
  const killer = await Client.connect(topo.url, { decodeResponses: true })
  try {
    for (let round = 0; round < 3; round++) {
      assert.equal(await c.execute(['SET', `own:k${round}`, `v${round}`]), 'OK')
      const id = await c.execute(['CLIENT', 'ID'])
      assert.equal(await killer.execute(['CLIENT', 'KILL', 'ID', String(id)]), 1)
      // The next command may meet the dead connection (and fail as connection_lost): what
      // matters is that the client comes back and reads its replies here again.
      let value
      const until = Date.now() + 10000
      for (;;) {
        try {
          value = await c.execute(['GET', `own:k${round}`])
          break
        } catch (e) {
          if (e.code !== 'connection_lost' || Date.now() > until) throw e
        }
      }
      assert.equal(value, `v${round}`)
      assert.notEqual(await c.execute(['CLIENT', 'ID']), id, 'a new connection')
      const before = native.repliesReadHereForTest()
      for (let i = 0; i < 20; i++) assert.equal(await c.execute(['GET', `own:k${round}`]), `v${round}`)
      assert.equal(native.repliesReadHereForTest() - before, 20)
    }
  } finally {
    await killer.close()
    await c.close()
  }
})

test('close() settles a command whose reply this thread is waiting for', async () => {
  const c = await Client.connect(topo.url)
  const slow = c.execute(['DEBUG', 'SLEEP', '0.5'])
  // Handled from the start: it is rejected before close() resolves, possibly a turn of the
  // loop earlier, and a rejection still unhandled then fails the test as an unhandled one.
  const rejected = assert.rejects(slow, (e) => e.code === 'closed')
  await c.close()
  await rejected
})

test('a worker that ends while its thread waits for a reply, or with a client left open, leaves nothing behind', async () => {
  // Each worker sends a slow command on an idle connection (its thread then watches the
  // socket) and is terminated, or exits, before the reply; or ('idle') is terminated with its
  // client open and nothing in flight, the socket still watched after the PING's reply: node
  // closes the worker's loop, which aborts the process if a handle is still open on it. ('many')
  // ends with 64 in flight, their replies read on the worker's thread.
  const r = await runChild(`
    const { Worker } = require('node:worker_threads')
    const body = (how) => \`
      const { parentPort } = require('node:worker_threads')
      const { Client } = require(process.env.SR_MODULE)
      ;(async () => {
        const c = await Client.connect(process.env.SR_URL)
        await c.execute(['PING'])
        // 'idle': nothing in flight, the poll handle of the PING's read left on the socket.
        if ('\${how}' !== 'idle') c.execute(['DEBUG', 'SLEEP', '1']).catch(() => {})
        // 'many': 63 more join the slow one's reads, some deferred, when the worker ends.
        if ('\${how}' === 'many') for (let i = 0; i < 63; i++) c.execute(['GET', 'k' + i]).catch(() => {})
        if ('\${how}' === 'exit') setImmediate(() => process.exit(0))
        else parentPort.postMessage('sent')
      })()
    \`
    ;(async () => {
      for (const how of ['terminate', 'exit', 'terminate', 'idle', 'many']) {
        const w = new Worker(body(how), { eval: true })
        if (how !== 'exit') {
          await new Promise((resolve) => w.once('message', resolve))
          await w.terminate()
        } else {
          await new Promise((resolve) => w.once('exit', resolve))
        }
      }
      console.log('done')
    })()
  `, { SR_URL: topo.url }, 30000)
  assert.equal(r.signal, null, `the process was killed by ${r.signal}; stderr: ${r.stderr}`)
  assert.equal(r.code, 0, `exit code ${r.code}; stderr: ${r.stderr}`)
  assert.equal(r.stdout.trim(), 'done')
})
