'use strict'
// BullMQ on sentinel-recovery/ioredis through a planned failover and a kill -9, beside BullMQ on
// ioredis' own sentinel mode (recorded, not asserted): jobs added vs processed vs processed twice.
//
// What is fair to assert. BullMQ is at-least-once: a job whose worker could not renew its lock
// (here: the lock renewal, or the completion, was in flight when the connection to the old
// primary was closed) is found stalled and processed again, and BullMQ says so with the
// worker's 'stalled' event (docs.bullmq.io, guide/jobs/stalled and "Important Notes"). So a job
// processed twice is a failure only if BullMQ never reported it stalled. Lost: a job whose add
// was acknowledged and that is never processed; after a planned failover there must be none
// (the adapter fences before the promotion); after a kill -9, only adds acknowledged in the
// last moments before the kill may be missing (asynchronous replication, as for any client).
// Processed is what the application sees; a worker and a producer that both kept talking to the
// demoted primary would see nothing wrong, so the completions the worker saw acknowledged are
// also looked up on the new primary.

const { test } = require('node:test')
const assert = require('node:assert/strict')
const { performance } = require('node:perf_hooks')
const Redis = require('ioredis')
const { Queue, Worker } = require('bullmq')
const { createIORedis } = require('../ioredis.js')
const { startTopology, withDeadline, waitFor } = require('./helpers')
const { startProducers, recorder, completedOn, judgeJobs, sleep } = require('./workload')

const HOST = '127.0.0.1'

/** Worker options that let a stalled job come back within the test's seconds, not minutes. */
const WORKER_OPTIONS = { concurrency: 8, lockDuration: 3000, stalledInterval: 1000, maxStalledCount: 10 }

/**
 * A Queue + Worker on connections from `connect(side)`, with producers and a recorder. The two
 * sides follow the failover independently, as a producer and a worker in two processes would.
 */
async function startBullMQ(name, connect, prefix) {
  const queueConnection = connect('producer')
  const workerConnection = connect('worker')
  for (const c of [queueConnection, workerConnection]) c.on('error', () => {})
  const queue = new Queue(name, { connection: queueConnection })
  queue.on('error', () => {})
  const rec = recorder()
  const worker = new Worker(name, rec.processor, { connection: workerConnection, ...WORKER_OPTIONS })
  rec.watch(worker)
  await worker.waitUntilReady()
  const producers = startProducers(queue, { prefix })
  return {
    rec,
    producers,
    async close() {
      await producers.stop()
      await withDeadline(worker.close(), 10000, 'worker close').catch(() => worker.close(true))
      await withDeadline(queue.close(), 10000, 'queue close').catch(() => {})
      for (const c of [queueConnection, workerConnection]) c.disconnect()
    },
  }
}

/** Waits (up to `ms`) until every acknowledged add of `run` was processed. */
async function drained(run, ms) {
  try {
    await waitFor(() => [...run.producers.added.keys()].every((id) => run.rec.processed.has(id)), ms, 'drain')
  } catch {
    // Judged below: what is still missing is counted as lost.
  }
}

async function bullmqThrough(t, fault) {
  const topo = await startTopology()
  const oldPort = topo.info.primary.port
  const sentinels = topo.info.sentinels.map((s) => ({ host: HOST, port: s.port }))
  let ours, theirs
  try {
    // A Client of its own for each side (clientOptions differ), as in two processes.
    ours = await startBullMQ('adapter', (side) => createIORedis(topo.url, { clientOptions: { clientName: side } }), 'a')
    theirs = await startBullMQ(
      'ioredis',
      () => new Redis({ sentinels, name: topo.info.service, failoverDetector: true, maxRetriesPerRequest: null }),
      'i',
    )
    await waitFor(() => ours.rec.processed.size > 100 && theirs.rec.processed.size > 100, 20000, 'jobs before the fault')
    const since = performance.now()
    const faulted = await topo.cmd(fault === 'kill9' ? `kill9 ${oldPort}` : 'failover')
    assert.equal(faulted.ok, true, JSON.stringify(faulted))
    // A kill -9 is done only when the command answered: adds the old primary acknowledged
    // before that may be lost with it (asynchronous replication), so they are judged as
    // before the fault. A planned failover is judged from when it was asked for.
    const judgedFrom = fault === 'kill9' ? performance.now() : since
    const moved = await topo.cmd(`wait-primary-not ${oldPort} 30000`)
    assert.equal(moved.ok, true, JSON.stringify(moved))
    const switched = performance.now()
    const addedSince = (run) => [...run.producers.added.values()].filter((a) => a.at >= switched).length
    await waitFor(() => addedSince(ours) > 100, 20000, 'adapter jobs added after the switch')
    await sleep(1000)
    await Promise.all([ours.producers.stop(), theirs.producers.stop()])
    // Stalled jobs come back after lockDuration + a stalled check or two.
    await Promise.all([drained(ours, 15000), drained(theirs, 3000)])
    const reader = new Redis({ host: HOST, port: moved.port, maxRetriesPerRequest: 1 })
    const [oursDone, theirsDone] = await Promise.all([completedOn(reader, 'adapter'), completedOn(reader, 'ioredis')])
    reader.disconnect()
    const verdict = {
      adapter: judgeJobs(ours.producers, ours.rec, judgedFrom, oursDone),
      ioredisSentinel: judgeJobs(theirs.producers, theirs.rec, judgedFrom, theirsDone),
    }
    t.diagnostic(`bullmq ${fault}: ${JSON.stringify(verdict)}`)
    return verdict
  } finally {
    await Promise.all([ours?.close(), theirs?.close()]).catch(() => {})
    await topo.down()
  }
}

test('BullMQ through a planned failover: nothing acknowledged lost, twice only when BullMQ reported it stalled', async (t) => {
  const { adapter } = await bullmqThrough(t, 'failover')
  assert.ok(adapter.added > 200)
  assert.equal(adapter.lost, 0, 'a job whose add was acknowledged was never processed')
  assert.equal(adapter.completionsLost, 0, 'a completion the worker saw acknowledged is not on the new primary')
  assert.equal(adapter.twiceNotStalled, 0, 'a job ran twice without BullMQ reporting it stalled')
})

test('BullMQ through a kill -9 of the primary: losses only inside the replication window, twice only when stalled', async (t) => {
  const { adapter } = await bullmqThrough(t, 'kill9')
  assert.ok(adapter.added > 200)
  assert.equal(adapter.lostAfter, 0, 'a job added after the kill was never processed')
  assert.ok(adapter.oldestLostBeforeMs <= 100, `lost a job added ${adapter.oldestLostBeforeMs} ms before the kill`)
  assert.equal(adapter.completionsLostAfter, 0, 'a completion acknowledged after the kill is not on the new primary')
  assert.equal(adapter.twiceNotStalled, 0, 'a job ran twice without BullMQ reporting it stalled')
})
