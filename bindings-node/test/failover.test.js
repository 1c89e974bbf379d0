'use strict'
// kill -9 of the primary under 16 concurrent writers: no command hangs, no acknowledged write is
// lost, the only errors are timeout/connection_lost, and events arrive in order.

const { test } = require('node:test')
const assert = require('node:assert/strict')
const { Client } = require('..')
const { startTopology, withDeadline, waitFor } = require('./helpers')

test('failover with concurrent writers and ordered events', async () => {
  const topo = await startTopology()
  const client = await Client.connect(topo.url, { commandTimeoutMs: 10000 })
  const events = []
  client.on('event', (e) => events.push(e))
  const oldPort = topo.info.primary.port
  let stop = false
  let issued = 0
  let acknowledged = 0
  const errors = []
  let lastAck = 0
  const writer = async () => {
    while (!stop) {
      issued++
      try {
        // A command that neither resolves nor rejects within its own deadline plus slack hangs.
        await withDeadline(client.execute(['INCR', 'failover:counter']), 20000, 'INCR')
        acknowledged++
        lastAck = Date.now()
      } catch (e) {
        errors.push(e)
        await new Promise((r) => setTimeout(r, 10))
      }
    }
  }
  try {
    const writers = Array.from({ length: 16 }, writer)
    await waitFor(() => acknowledged > 200, 10000, 'writes before the failover')
    assert.equal((await topo.cmd(`kill9 ${oldPort}`)).ok, true)
    const killedAt = Date.now()
    const moved = await topo.cmd(`wait-primary-not ${oldPort} 30000`)
    assert.equal(moved.ok, true, JSON.stringify(moved))
    // Writes succeed again on the new primary.
    await waitFor(() => lastAck > killedAt && client.topology().primary.port === moved.port, 30000, 'writes after the failover')
    const ackAfter = acknowledged
    await waitFor(() => acknowledged > ackAfter + 100, 10000, 'steady writes after the failover')
    stop = true
    await withDeadline(Promise.all(writers), 30000, 'writers to finish')

    const final = Number(await client.execute(['GET', 'failover:counter']))
    // Nothing acknowledged is lost beyond what the old primary had not replicated: the counter
    // never exceeds what was issued, and acknowledged increments after the switch all landed.
    assert.ok(final <= issued, `final ${final} <= issued ${issued}`)
    assert.ok(final >= acknowledged - ackAfter, `final ${final} counts the writes after the switch`)
    for (const e of errors) {
      assert.ok(['timeout', 'connection_lost'].includes(e.code), `unexpected ${e.code}: ${e.message}`)
    }

    // Events in order: non-decreasing time, a chain of primary_changed ending at the new primary,
    // the loss of the old primary's connection before the switch away from it.
    for (let i = 1; i < events.length; i++) assert.ok(events[i].at >= events[i - 1].at, 'event times ordered')
    // (The first discovery's primary_changed, old null, may arrive after connect resolved.)
    const switches = events.filter((e) => e.kind === 'primary_changed' && e.old !== null)
    assert.ok(switches.length >= 1, 'a primary_changed event')
    const last = switches[switches.length - 1]
    assert.deepEqual(last.new, { host: '127.0.0.1', port: moved.port })
    assert.deepEqual(switches[0].old, { host: '127.0.0.1', port: oldPort })
    for (let i = 1; i < switches.length; i++) assert.deepEqual(switches[i].old, switches[i - 1].new)
    const lost = events.findIndex((e) => e.kind === 'connection_lost' && e.address.port === oldPort)
    if (lost >= 0) assert.ok(lost < events.indexOf(switches[0]), 'connection_lost before primary_changed')
    assert.ok(events.every((e) => e.service === topo.info.service))
  } finally {
    stop = true
    await client.close()
    await topo.down()
  }
})
