'use strict'
// Pub/sub: a subscription receives messages published before and after a kill -9 failover, with
// subscription_lost then subscription_restored in between, and what the gap lost is counted;
// changes at runtime, `for await`, and the end on close.

const { test } = require('node:test')
const assert = require('node:assert/strict')
const { Client, Subscription } = require('..')
const { startTopology, withDeadline, waitFor } = require('./helpers')

test('messages before and after a kill -9 failover, the loss counted', async () => {
  const topo = await startTopology()
  const client = await Client.connect(topo.url, { commandTimeoutMs: 10000 })
  const events = []
  client.on('event', (e) => events.push(e))
  const oldPort = topo.info.primary.port
  let stop = false
  let attempted = 0
  let acknowledged = 0
  const received = []
  const alerts = []
  try {
    const sub = await client.subscribe(['news'], { patterns: ['alerts.*'] })
    assert.ok(sub instanceof Subscription)
    assert.deepEqual(sub.channels, ['news'])
    sub.on('message', (m) => {
      if (m.pattern === null) {
        assert.equal(m.channel.toString(), 'news')
        received.push(Number(m.message.toString()))
      } else {
        alerts.push(m)
      }
    })
    const publisher = (async () => {
      while (!stop) {
        const n = attempted++
        try {
          await client.execute(['PUBLISH', 'news', n])
          acknowledged++
        } catch (e) {
          // timeout / connection_lost: may or may not have been published; counted as attempted
          assert.ok(['timeout', 'connection_lost'].includes(e.code), `${e.code}: ${e.message}`)
        }
        await new Promise((r) => setTimeout(r, 5))
      }
    })()
    await waitFor(() => received.length >= 20, 20000, 'messages before the kill')

    assert.equal((await topo.cmd(`kill9 ${oldPort}`)).ok, true)
    await waitFor(() => events.some((e) => e.kind === 'subscription_restored'), 90000, 'subscription_restored')
    const afterRestore = attempted
    await waitFor(() => received.filter((n) => n >= afterRestore).length >= 20, 30000, 'messages after the restore')
    stop = true
    await withDeadline(publisher, 30000, 'the publisher to stop')

    const kinds = events.map((e) => e.kind)
    const lost = events.find((e) => e.kind === 'subscription_lost')
    const restored = events.find((e) => e.kind === 'subscription_restored')
    assert.ok(kinds.indexOf('subscription_lost') < kinds.indexOf('subscription_restored'))
    assert.equal(lost.address.port, oldPort)
    assert.notEqual(restored.address.port, oldPort)
    assert.ok(restored.gap_ms > 0)
    assert.deepEqual(client.topology().primary, restored.address)

    // The pattern was subscribed again too.
    await client.execute(['PUBLISH', 'alerts.disk', 'full'])
    await waitFor(() => alerts.length > 0, 10000, 'a pattern message')
    assert.equal(alerts[0].channel.toString(), 'alerts.disk')
    assert.equal(alerts[0].pattern.toString(), 'alerts.*')
    assert.equal(alerts[0].message.toString(), 'full')

    for (let i = 1; i < received.length; i++) assert.ok(received[i - 1] < received[i], 'in order, each once')
    assert.ok(received.every((n) => n < attempted))
    console.log(
      `pub/sub across kill -9: ${attempted} published (${acknowledged} acknowledged), ${received.length} received, ` +
        `${attempted - received.length} lost in a gap of ${restored.gap_ms} ms, ${sub.dropped} dropped by the buffer`,
    )
    assert.equal(sub.dropped, 0)
    const ended = new Promise((resolve) => sub.once('end', resolve))
    await sub.unsubscribe()
    await withDeadline(ended, 10000, "the subscription's end")
    assert.equal(sub.closed, true)
  } finally {
    stop = true
    await client.close()
    await topo.down()
  }
})

test('for await, changes at runtime, and the end when the client closes', async () => {
  const topo = await startTopology()
  const client = await Client.connect(topo.url, { decodeResponses: true })
  try {
    const sub = await client.psubscribe(['js:p.*'])
    const got = []
    const loop = (async () => {
      for await (const m of sub) got.push(m)
    })()
    await client.execute(['PUBLISH', 'js:p.1', 'a'])
    await waitFor(() => got.length === 1, 10000, 'the first message')
    assert.deepEqual(got[0], { channel: 'js:p.1', message: 'a', pattern: 'js:p.*' })

    await sub.subscribe(['js:c'])
    await sub.punsubscribe(['js:p.*'])
    assert.deepEqual(sub.patterns, [])
    assert.equal(await client.execute(['PUBLISH', 'js:p.2', 'b']), 0, 'nobody listens to the pattern')
    await client.execute(['PUBLISH', 'js:c', 'c'])
    await waitFor(() => got.length === 2, 10000, 'the channel message')
    assert.deepEqual(got[1], { channel: 'js:c', message: 'c', pattern: null })

    await assert.rejects(client.subscribe([]), { code: 'config' })
    await assert.rejects(client.subscribe(['a'], { buffer: 0 }), TypeError)
    await client.close()
    await withDeadline(loop, 10000, 'the iteration to end with the client')
    assert.equal(sub.closed, true)
  } finally {
    await client.close()
    await topo.down()
  }
})
