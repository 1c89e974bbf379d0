'use strict'
// Issue 27, Node part of bench/frameworks: ioredis through sentinel-recovery/ioredis vs ioredis'
// own sentinel mode (`sentinels: [...]`, `failoverDetector: true`), each on a fresh topology,
// through a planned SENTINEL FAILOVER and a kill -9 of the primary:
//   - acknowledged writes lost (8 writers RPUSH unique ids, final read from the new primary),
//     ids written twice, the longest gap between two acknowledgements;
//   - sentinel commands (and connections) in the WINDOW_MS from the fault: INFO stats
//     total_commands_processed / total_connections_received summed over the sentinels (Redis 7.0
//     sentinels have no INFO commandstats, so the sentinels' traffic to each other is in it too); a
//     run with no client through the same fault measures that background, and the table shows
//     each client's figure minus it.
// Then the adapter's cost per command against ioredis talking to the primary directly:
// sequential GET/SET and 64 in flight, interleaved rounds, medians.
//
// Usage: node bench/frameworks/node/run.js [--rounds N] [--quick]
// Needs `npm ci` in bindings-node (the addon, ioredis) and the testkit's sr-topology.

const path = require('node:path')
const { createRequire } = require('node:module')
const { performance } = require('node:perf_hooks')

const BINDINGS = path.resolve(__dirname, '..', '..', '..', 'bindings-node')
const requireFromBindings = createRequire(path.join(BINDINGS, 'package.json'))
const Redis = requireFromBindings('ioredis')
const { createIORedis } = require(path.join(BINDINGS, 'ioredis.js'))
const { startTopology, waitFor } = require(path.join(BINDINGS, 'test', 'helpers.js'))
const { startWriters, judge, sleep } = require(path.join(BINDINGS, 'test', 'workload.js'))

const HOST = '127.0.0.1'
const args = process.argv.slice(2)
const QUICK = args.includes('--quick')
const ROUNDS = Number(args[args.indexOf('--rounds') + 1]) || (QUICK ? 3 : 9)
/** How long after the fault the sentinel traffic is counted (the same for every client). */
const WINDOW_MS = 10000

/** A sentinel's `{commands, connections}` so far (INFO stats). */
async function sentinelStats(port) {
  const r = new Redis({ host: HOST, port, maxRetriesPerRequest: 1, lazyConnect: true })
  await r.connect()
  const text = await r.info('stats')
  r.disconnect()
  const field = (name) => Number(new RegExp(`^${name}:(\\d+)`, 'm').exec(text)[1])
  return { commands: field('total_commands_processed'), connections: field('total_connections_received') }
}

/** What every sentinel received between two snapshots, summed. */
function sentinelDelta(before, after) {
  let commands = 0
  let connections = 0
  for (let i = 0; i < after.length; i++) {
    commands += after[i].commands - before[i].commands
    connections += after[i].connections - before[i].connections
  }
  return { commands, connections }
}

function ownSentinelMode(topo) {
  return new Redis({
    sentinels: topo.info.sentinels.map((s) => ({ host: HOST, port: s.port })),
    name: topo.info.service,
    failoverDetector: true,
  })
}

/** One client kind (or none) through one fault on a fresh topology. */
async function failoverRun(kind, fault) {
  const topo = await startTopology()
  const oldPort = topo.info.primary.port
  const sentinelPorts = topo.info.sentinels.map((s) => s.port)
  const redis = kind === 'adapter' ? createIORedis(topo.url) : kind === 'ioredis-sentinel' ? ownSentinelMode(topo) : null
  let writers
  try {
    if (redis) {
      redis.on('error', () => {})
      await redis.ping()
      writers = startWriters(redis, 'bench:loss', { prefix: 'w' })
      await waitFor(() => writers.acked.size > 2000, 20000, 'writes before the fault')
    } else {
      await sleep(1000)
    }
    const before = await Promise.all(sentinelPorts.map(sentinelStats))
    const since = performance.now()
    const faulted = await topo.cmd(fault === 'kill9' ? `kill9 ${oldPort}` : 'failover')
    if (!faulted.ok) throw new Error(`${fault}: ${JSON.stringify(faulted)}`)
    const moved = await topo.cmd(`wait-primary-not ${oldPort} 30000`)
    if (!moved.ok) throw new Error(`no new primary: ${JSON.stringify(moved)}`)
    const switchedAfterMs = Math.round(performance.now() - since)
    await sleep(Math.max(0, WINDOW_MS - (performance.now() - since)))
    const after = await Promise.all(sentinelPorts.map(sentinelStats))
    const sentinel = sentinelDelta(before, after)
    const result = { kind, fault, switchedAfterMs, sentinelCommands: sentinel.commands, sentinelConnections: sentinel.connections }
    if (writers) {
      await writers.stop()
      const reader = new Redis({ host: HOST, port: moved.port, maxRetriesPerRequest: 1 })
      const list = await reader.lrange('bench:loss', 0, -1)
      reader.disconnect()
      Object.assign(result, judge(list, writers, since))
    }
    return result
  } finally {
    await writers?.stop()
    redis?.disconnect()
    await topo.down()
  }
}

async function timed(fn) {
  const t0 = performance.now()
  const n = await fn()
  return ((performance.now() - t0) * 1000) / n // microseconds per command
}

async function sequential(redis, ops) {
  for (let i = 0; i < ops; i++) {
    if (i & 1) await redis.get('bench:k')
    else await redis.set('bench:k', 'v')
  }
  return ops
}

async function inFlight(redis, ops, depth = 64) {
  let next = 0
  const lane = async () => {
    while (next < ops) {
      const i = next++
      if (i & 1) await redis.get('bench:k')
      else await redis.set('bench:k', 'v')
    }
  }
  await Promise.all(Array.from({ length: depth }, lane))
  return ops
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b)
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2
}

async function overheadRun() {
  const topo = await startTopology()
  const adapter = createIORedis(topo.url)
  const direct = new Redis({ host: HOST, port: topo.info.primary.port, maxRetriesPerRequest: null, autoResendUnfulfilledCommands: false })
  try {
    await Promise.all([adapter.ping(), direct.ping()])
    const seqOps = QUICK ? 2000 : 10000
    const parOps = QUICK ? 20000 : 100000
    // Warm-up of both, then interleaved rounds (alternating who goes first).
    await sequential(adapter, 2000)
    await sequential(direct, 2000)
    await inFlight(adapter, 20000)
    await inFlight(direct, 20000)
    const r = { seqAdapter: [], seqDirect: [], parAdapter: [], parDirect: [] }
    for (let i = 0; i < ROUNDS; i++) {
      const order = i % 2 ? ['direct', 'adapter'] : ['adapter', 'direct']
      for (const who of order) {
        const c = who === 'adapter' ? adapter : direct
        r[who === 'adapter' ? 'seqAdapter' : 'seqDirect'].push(await timed(() => sequential(c, seqOps)))
      }
      for (const who of order) {
        const c = who === 'adapter' ? adapter : direct
        r[who === 'adapter' ? 'parAdapter' : 'parDirect'].push(await timed(() => inFlight(c, parOps)))
      }
    }
    const m = Object.fromEntries(Object.entries(r).map(([k, v]) => [k, median(v)]))
    return {
      rounds: ROUNDS,
      seqOps,
      parOps,
      sequentialUs: { adapter: m.seqAdapter, direct: m.seqDirect, overheadPct: (m.seqAdapter / m.seqDirect - 1) * 100 },
      inFlight64Us: { adapter: m.parAdapter, direct: m.parDirect, overheadPct: (m.parAdapter / m.parDirect - 1) * 100 },
      perRoundOverheadPct: {
        sequential: r.seqAdapter.map((a, i) => +((a / r.seqDirect[i] - 1) * 100).toFixed(1)),
        inFlight64: r.parAdapter.map((a, i) => +((a / r.parDirect[i] - 1) * 100).toFixed(1)),
      },
    }
  } finally {
    await adapter.quit().catch(() => adapter.disconnect())
    direct.disconnect()
    await topo.down()
  }
}

function markdown(runs, overhead) {
  const lines = []
  lines.push(
    '| fault | client | acknowledged | lost (of them after the fault) | written twice | failed writes (of them ran anyway) | longest write gap ms | sentinel commands / connections in 10 s, minus background |',
  )
  lines.push('|---|---|---:|---:|---:|---:|---:|---:|')
  for (const r of runs) {
    const who = r.kind === 'none' ? 'no client (background)' : r.kind === 'adapter' ? 'sentinel-recovery/ioredis' : "ioredis' sentinel mode"
    const bg = runs.find((b) => b.kind === 'none' && b.fault === r.fault)
    if (r.kind === 'none') {
      lines.push(`| ${r.fault} | ${who} | | | | | | ${r.sentinelCommands} / ${r.sentinelConnections} (raw) |`)
    } else {
      lines.push(
        `| ${r.fault} | ${who} | ${r.acknowledged} | ${r.lost} (${r.lostAfter}) | ${r.duplicates} | ${r.errors} (${r.unacknowledgedPresent}) | ${r.maxGapMs} | ${r.sentinelCommands - bg.sentinelCommands} / ${r.sentinelConnections - bg.sentinelConnections} |`,
      )
    }
  }
  lines.push('')
  const f = (x) => x.toFixed(2)
  const p = (x) => (x >= 0 ? '+' : '') + x.toFixed(1) + ' %'
  lines.push(`Cost per command, µs (median of ${overhead.rounds} interleaved rounds; GET/SET alternating):`)
  lines.push('')
  lines.push('| workload | ioredis direct to the primary | sentinel-recovery/ioredis | overhead |')
  lines.push('|---|---:|---:|---:|')
  lines.push(`| sequential (${overhead.seqOps} commands) | ${f(overhead.sequentialUs.direct)} | ${f(overhead.sequentialUs.adapter)} | ${p(overhead.sequentialUs.overheadPct)} |`)
  lines.push(`| 64 in flight (${overhead.parOps} commands) | ${f(overhead.inFlight64Us.direct)} | ${f(overhead.inFlight64Us.adapter)} | ${p(overhead.inFlight64Us.overheadPct)} |`)
  lines.push('')
  lines.push(`Per-round overhead %: sequential ${JSON.stringify(overhead.perRoundOverheadPct.sequential)}, 64 in flight ${JSON.stringify(overhead.perRoundOverheadPct.inFlight64)}`)
  return lines.join('\n')
}

async function main() {
  const runs = []
  for (const fault of ['failover', 'kill9']) {
    for (const kind of ['adapter', 'ioredis-sentinel', 'none']) {
      const r = await failoverRun(kind, fault)
      process.stderr.write(JSON.stringify(r) + '\n')
      runs.push(r)
    }
  }
  const overhead = await overheadRun()
  process.stderr.write(JSON.stringify(overhead) + '\n')
  process.stdout.write(markdown(runs, overhead) + '\n')
}

main().catch((e) => {
  console.error(e)
  process.exitCode = 1
})
