'use strict'
// The loss workload of issue 27, shared by test/ioredis.test.js and bench/frameworks/node: writers
// RPUSH unique ids through an ioredis instance across a failover, then the list is read back from
// the new primary and judged (acknowledged writes lost, ids written twice, the longest gap
// between two acknowledgements). Also the BullMQ counterpart (jobs added vs processed).

const { performance } = require('node:perf_hooks')

const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

/**
 * Starts `writers` concurrent loops that RPUSH `${prefix}${writer}:${seq}` to `key` through
 * `redis` until `stop()`. Each acknowledgement is timed (performance.now()). A failed RPUSH is
 * counted and never retried (it may have run: retrying could write an id twice).
 */
function startWriters(redis, key, { writers = 8, prefix = 'w' } = {}) {
  const acked = new Map()
  const errors = new Map()
  let stopped = false
  let lastAck = 0
  let maxGapMs = 0
  const loop = async (w) => {
    for (let seq = 0; !stopped; seq++) {
      const id = `${prefix}${w}:${seq}`
      try {
        await redis.rpush(key, id)
        const now = performance.now()
        acked.set(id, now)
        if (lastAck > 0) maxGapMs = Math.max(maxGapMs, now - lastAck)
        lastAck = now
      } catch (e) {
        const kind = String((e && e.message) || e).slice(0, 60)
        errors.set(kind, (errors.get(kind) || 0) + 1)
        await sleep(5)
      }
    }
  }
  const running = Array.from({ length: writers }, (_, w) => loop(w))
  return {
    acked,
    errors,
    /** Acknowledgements after `since` (a performance.now() time). */
    ackedSince: (since) => {
      let n = 0
      for (const t of acked.values()) if (t >= since) n++
      return n
    },
    get maxGapMs() {
      return maxGapMs
    },
    async stop() {
      stopped = true
      await Promise.all(running)
    },
  }
}

/**
 * Judges `final` (the list read from the new primary) against the acknowledged ids:
 * `lost` acknowledged but absent, `lostAfter` of those acknowledged at or after `since` (the
 * moment the failover was started), `oldestLostBeforeMs` how long before `since` the earliest
 * lost one was acknowledged, `duplicates` ids present more than once, `unacknowledgedPresent`
 * ids whose RPUSH failed (or never returned) but ran.
 */
function judge(final, writers, since) {
  const counts = new Map()
  for (const id of final) counts.set(id, (counts.get(id) || 0) + 1)
  let lost = 0
  let lostAfter = 0
  let oldestLostBeforeMs = 0
  for (const [id, t] of writers.acked) {
    if (counts.has(id)) continue
    lost++
    if (t >= since) lostAfter++
    else oldestLostBeforeMs = Math.max(oldestLostBeforeMs, since - t)
  }
  let duplicates = 0
  let unacknowledgedPresent = 0
  for (const [id, n] of counts) {
    if (n > 1) duplicates++
    if (!writers.acked.has(id)) unacknowledgedPresent++
  }
  const errors = [...writers.errors.values()].reduce((a, b) => a + b, 0)
  return {
    acknowledged: writers.acked.size,
    lost,
    lostAfter,
    oldestLostBeforeMs: Math.round(oldestLostBeforeMs),
    duplicates,
    unacknowledgedPresent,
    errors,
    errorKinds: Object.fromEntries(writers.errors),
    maxGapMs: Math.round(writers.maxGapMs),
  }
}

/**
 * BullMQ through a failover: `producers` loops add jobs `{id}` to `queue`; `worker` (already
 * built on a processor from `recorder()`) processes them. Returns `{stop(), added}`; `added`
 * maps id -> {jobId, at}.
 */
function startProducers(queue, { producers = 8, prefix = 'j' } = {}) {
  const added = new Map()
  const errors = new Map()
  let stopped = false
  const loop = async (p) => {
    for (let seq = 0; !stopped; seq++) {
      const id = `${prefix}${p}:${seq}`
      try {
        const job = await queue.add('job', { id })
        added.set(id, { jobId: job.id, at: performance.now() })
      } catch (e) {
        const kind = String((e && e.message) || e).slice(0, 60)
        errors.set(kind, (errors.get(kind) || 0) + 1)
        await sleep(5)
      }
    }
  }
  const running = Array.from({ length: producers }, (_, p) => loop(p))
  return {
    added,
    errors,
    async stop() {
      stopped = true
      await Promise.all(running)
    },
  }
}

/**
 * A BullMQ processor that counts how often each job id ran; also the jobs reported stalled, and
 * when the worker saw each job's completion acknowledged (its 'completed' event).
 */
function recorder() {
  const processed = new Map()
  const stalled = new Set()
  const completed = new Map()
  return {
    processed,
    stalled,
    completed,
    processor: async (job) => {
      processed.set(job.data.id, (processed.get(job.data.id) || 0) + 1)
    },
    watch(worker) {
      worker.on('stalled', (jobId) => stalled.add(String(jobId)))
      worker.on('completed', (job) => completed.set(job.data.id, performance.now()))
      worker.on('error', () => {})
    },
  }
}

/**
 * The ids (`data.id`) of the jobs of queue `name` that `redis` (a connection to the new
 * primary) holds as completed: a completion the worker saw acknowledged on a primary that a
 * failover then discarded is missing here.
 */
async function completedOn(redis, name) {
  const jobIds = await redis.zrange(`bull:${name}:completed`, 0, -1)
  const pipeline = redis.pipeline()
  for (const jobId of jobIds) pipeline.hget(`bull:${name}:${jobId}`, 'data')
  const ids = new Set()
  for (const [err, data] of await pipeline.exec()) if (!err && data) ids.add(JSON.parse(data).id)
  return ids
}

/**
 * Judges BullMQ's counts: `lost` jobs whose add was acknowledged but never processed
 * (`lostAfter` of those added at or after `since`), `processedTwice` jobs run more than once,
 * `twiceNotStalled` of those that BullMQ never reported stalled (its at-least-once redelivery),
 * `completionsLost` completions the worker saw acknowledged that `completedIds` (read from the
 * new primary) lacks (`completionsLostAfter` of those acknowledged at or after `since`).
 */
function judgeJobs(producers, rec, since, completedIds) {
  let completionsLost = 0
  let completionsLostAfter = 0
  for (const [id, at] of rec.completed) {
    if (completedIds.has(id)) continue
    completionsLost++
    if (at >= since) completionsLostAfter++
  }
  let lost = 0
  let lostAfter = 0
  let oldestLostBeforeMs = 0
  let processedTwice = 0
  let twiceNotStalled = 0
  for (const [id, { jobId, at }] of producers.added) {
    const n = rec.processed.get(id) || 0
    if (n === 0) {
      lost++
      if (at >= since) lostAfter++
      else oldestLostBeforeMs = Math.max(oldestLostBeforeMs, since - at)
    }
    if (n > 1) {
      processedTwice++
      if (!rec.stalled.has(String(jobId))) twiceNotStalled++
    }
  }
  return {
    added: producers.added.size,
    processed: rec.processed.size,
    lost,
    lostAfter,
    oldestLostBeforeMs: Math.round(oldestLostBeforeMs),
    processedTwice,
    twiceNotStalled,
    stalled: rec.stalled.size,
    completionsLost,
    completionsLostAfter,
    addErrors: [...producers.errors.values()].reduce((a, b) => a + b, 0),
  }
}

module.exports = { startWriters, judge, startProducers, recorder, completedOn, judgeJobs, sleep }
