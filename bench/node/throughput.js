'use strict'
// Throughput and latency of SET/GET, sequential (one at a time) and 64 concurrent, on one client
// per library, against the same real primary: sentinel-recovery, ioredis (sentinel mode),
// node-redis (createSentinel), valkey-glide (straight to the primary), and redis-benchmark as the
// ceiling. Usage: node throughput.js [SEQ_OPS] [CONC_OPS]
//
// 64 in flight alone, ours against ioredis direct to the primary (`make bench-node-x64`):
//   node throughput.js x64 [ROUNDS=5] [OPS=100000]
//   node throughput.js x64-one sr|io get|set SIZE [OPS [URL PORT]]   (one client alone: strace, perf)
// Each round measures, per value size (16 B, 4 KiB) and op (SET, GET), OPS commands with 64 in
// flight on one client of each library, the two in alternating order, then redis-benchmark with
// one connection and 64 pipelined (`-c 1 -P 64`) and with 64 connections (`-c 64`) on the same
// primary: the server's ceiling in the same machine state. Prints medians and min–max over the
// rounds, the ratio ours / ioredis (median and min–max of the per-round ratios), and CPU µs per
// command of the JavaScript thread and of the core's threads (from /proc/self/task/*/schedstat).
const fs = require('node:fs')
const { execFileSync } = require('node:child_process')
const { startTopology, sr, percentile, sentinelsOf } = require('./common')
const Redis = require('ioredis')

const SEQ = Number(process.argv[2] || 20000)
const CONC = Number(process.argv[3] || 200000)
const WIDTH = 64

async function sequential(op) {
  const lat = new Float64Array(SEQ)
  const t0 = process.hrtime.bigint()
  for (let i = 0; i < SEQ; i++) {
    const s = process.hrtime.bigint()
    await op(i)
    lat[i] = Number(process.hrtime.bigint() - s) / 1e3
  }
  const secs = Number(process.hrtime.bigint() - t0) / 1e9
  lat.sort()
  return { ops: SEQ / secs, p50: percentile(lat, 50), p99: percentile(lat, 99) }
}

async function concurrent(op) {
  let next = 0
  const t0 = process.hrtime.bigint()
  await Promise.all(
    Array.from({ length: WIDTH }, async () => {
      while (next < CONC) await op(next++)
    }),
  )
  return { ops: CONC / (Number(process.hrtime.bigint() - t0) / 1e9) }
}

async function measure(name, set, get) {
  const value = 'x'.repeat(16)
  for (let i = 0; i < 2000; i++) await set(i, value) // warm-up
  const row = { name }
  row.setSeq = await sequential((i) => set(i, value))
  row.getSeq = await sequential((i) => get(i))
  row.setConc = await concurrent((i) => set(i, value))
  row.getConc = await concurrent((i) => get(i))
  const f = (r) => Math.round(r.ops).toString()
  console.log(
    [name, f(row.setSeq), f(row.getSeq), row.getSeq.p50.toFixed(0), row.getSeq.p99.toFixed(0), f(row.setConc), f(row.getConc)].join('\t'),
  )
  return row
}

/** CPU ns so far of this process's threads, split into the JavaScript thread and the rest. */
function threadCpu() {
  const out = { main: 0, core: 0, other: 0 }
  for (const t of fs.readdirSync('/proc/self/task')) {
    try {
      const name = fs.readFileSync(`/proc/self/task/${t}/comm`, 'utf8').trim()
      const ns = Number(fs.readFileSync(`/proc/self/task/${t}/schedstat`, 'utf8').split(' ')[0])
      if (Number(t) === process.pid) out.main += ns
      else if (name.startsWith('sr-')) out.core += ns
      else out.other += ns
    } catch {
      // The thread ended meanwhile.
    }
  }
  return out
}

/** `ops` commands, 64 in flight; ops/s and CPU µs per command by thread group. */
async function x64Run(op, ops) {
  let next = 0
  const c0 = threadCpu()
  const t0 = process.hrtime.bigint()
  await Promise.all(
    Array.from({ length: WIDTH }, async () => {
      while (next < ops) await op(next++)
    }),
  )
  const secs = Number(process.hrtime.bigint() - t0) / 1e9
  const c1 = threadCpu()
  const per = (k) => (c1[k] - c0[k]) / 1e3 / ops
  return { ops: ops / secs, main: per('main'), core: per('core'), other: per('other') }
}

const X64_SIZES = [16, 4096]
const X64_KEYS = 1000
const xkey = (i) => `bench:x64:${i % X64_KEYS}`

/** The two clients' SET and GET with a value of `size` bytes (GET reads keys SET before). */
function x64Ops(ours, io, size) {
  const value = 'v'.repeat(size)
  return {
    set: { sr: (i) => ours.execute(['SET', xkey(i), value]), io: (i) => io.set(xkey(i), value) },
    get: { sr: (i) => ours.execute(['GET', xkey(i)]), io: (i) => io.get(xkey(i)) },
  }
}

async function x64Fill(io, size) {
  const value = 'v'.repeat(size)
  await Promise.all(Array.from({ length: X64_KEYS }, (_, i) => io.set(xkey(i), value)))
}

/** redis-benchmark SET and GET ops/s on `port`, `-d size`, with `extra` (-c / -P). */
function ceiling(port, size, ops, extra) {
  const out = execFileSync(
    'redis-benchmark',
    ['-p', String(port), '-t', 'set,get', '-n', String(ops), '-d', String(size), '--csv', ...extra],
    { encoding: 'utf8' },
  )
  const r = {}
  for (const line of out.split('\n')) {
    const m = /^"(SET|GET)","([\d.]+)"/.exec(line)
    if (m) r[m[1].toLowerCase()] = Number(m[2])
  }
  return r
}

const median = (a) => {
  const s = [...a].sort((x, y) => x - y)
  return s.length % 2 ? s[s.length >> 1] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2
}
const spread = (a, f) => `${f(Math.min(...a))}–${f(Math.max(...a))}`
const kops = (x) => (x / 1000).toFixed(1)

async function x64(rounds, ops) {
  const load0 = fs.readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ')
  const topo = await startTopology()
  const { info } = topo
  const ours = await sr.Client.connect(info.url)
  const io = new Redis({ host: '127.0.0.1', port: info.primary.port })
  await io.ping()
  const res = {}
  try {
    for (let r = 0; r < rounds; r++) {
      for (const size of X64_SIZES) {
        const ops64 = x64Ops(ours, io, size)
        await x64Fill(io, size)
        for (const op of ['set', 'get']) {
          const row = (res[`${op} ${size}`] ??= { sr: [], io: [], ratio: [], srMain: [], srCore: [], ioMain: [], p64: [], c64: [] })
          // Warm-up (JIT, connections, slabs), then the two in alternating order.
          await x64Run(ops64[op].sr, 2000)
          await x64Run(ops64[op].io, 2000)
          const order = r % 2 === 0 ? ['sr', 'io'] : ['io', 'sr']
          const got = {}
          for (const who of order) got[who] = await x64Run(ops64[op][who], ops)
          row.sr.push(got.sr.ops)
          row.io.push(got.io.ops)
          row.ratio.push(got.sr.ops / got.io.ops)
          row.srMain.push(got.sr.main)
          row.srCore.push(got.sr.core)
          row.ioMain.push(got.io.main)
        }
        const p64 = ceiling(info.primary.port, size, ops, ['-c', '1', '-P', '64'])
        const c64 = ceiling(info.primary.port, size, ops, ['-c', '64'])
        for (const op of ['set', 'get']) {
          res[`${op} ${size}`].p64.push(p64[op])
          res[`${op} ${size}`].c64.push(c64[op])
        }
      }
      process.stderr.write(`round ${r + 1}/${rounds} done\n`)
    }
  } finally {
    await ours.close()
    io.disconnect()
    await topo.down()
  }
  const load1 = fs.readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ')
  console.log(`# 64 in flight, one client, ${ops} commands per measurement, ${rounds} rounds interleaved; node ${process.version}; ${process.env.SR_ADDON_DIR ? `addon ${process.env.SR_ADDON_DIR}` : 'in-tree addon'}; loadavg ${load0} -> ${load1}`)
  console.log('# ours: sentinel-recovery (Buffer replies); ioredis direct to the primary (string replies); k ops/s median (min–max)')
  console.log('# CPU µs per command: ours JavaScript thread + core threads (sr-*), ioredis JavaScript thread')
  console.log('| op | value | ours k ops/s | ioredis k ops/s | ours / ioredis | CPU µs/cmd ours JS + core | ioredis JS | redis-benchmark -c 1 -P 64 | -c 64 |')
  console.log('|---|---|---|---|---|---|---|---|---|')
  for (const [k, row] of Object.entries(res)) {
    const [op, size] = k.split(' ')
    const f2 = (x) => x.toFixed(2)
    console.log(
      `| ${op.toUpperCase()} | ${size === '4096' ? '4 KiB' : `${size} B`} | ${kops(median(row.sr))} (${spread(row.sr, kops)}) | ${kops(median(row.io))} (${spread(row.io, kops)}) | **${f2(median(row.ratio))}×** (${spread(row.ratio, f2)}) | ${f2(median(row.srMain))} + ${f2(median(row.srCore))} | ${f2(median(row.ioMain))} | ${kops(median(row.p64))} | ${kops(median(row.c64))} |`,
    )
  }
}

/** One client alone at 64 in flight (for `strace -c -f` or `perf`): ops/s and CPU per command. */
async function x64One(who, op, size = '16', ops = '100000', url = undefined, port = undefined) {
  // With URL and PORT (of a topology started apart, `sr-topology up`), nothing else is started,
  // so `strace -f` counts this process's system calls alone.
  const topo = url ? null : await startTopology()
  const info = topo ? topo.info : { url, primary: { port: Number(port) } }
  const io = new Redis({ host: '127.0.0.1', port: info.primary.port })
  const ours = who === 'sr' ? await sr.Client.connect(info.url) : null
  try {
    await x64Fill(io, Number(size))
    const ops64 = x64Ops(ours, io, Number(size))
    await x64Run(ops64[op][who], 2000)
    const got = await x64Run(ops64[op][who], Number(ops))
    console.log(JSON.stringify({ who, op, size: Number(size), ...got }))
  } finally {
    if (ours) await ours.close()
    io.disconnect()
    if (topo) await topo.down()
  }
}

;(async () => {
  if (process.argv[2] === 'x64') return x64(Number(process.argv[3] || 5), Number(process.argv[4] || 100000))
  if (process.argv[2] === 'x64-one') return x64One(...process.argv.slice(3))
  const { createSentinel } = require('redis')
  const { GlideClient } = require('@valkey/valkey-glide')
  const topo = await startTopology()
  const { info } = topo
  const key = (i) => `bench:${i % 1000}`
  try {
    console.log(`# SEQ=${SEQ} CONC=${CONC} width=${WIDTH} node ${process.version}`)
    console.log('client\tSET seq/s\tGET seq/s\tGET p50 us\tGET p99 us\tSET x64/s\tGET x64/s')

    if (process.env.ONLY_SR) {
      const c = await sr.Client.connect(info.url)
      await measure('sentinel-recovery', (i, v) => c.execute(['SET', key(i), v]), (i) => c.execute(['GET', key(i)]))
      await c.close()
      return
    }
    const c = await sr.Client.connect(info.url)
    await measure('sentinel-recovery', (i, v) => c.execute(['SET', key(i), v]), (i) => c.execute(['GET', key(i)]))
    await c.close()

    const io = new Redis({ sentinels: sentinelsOf(info), name: info.service, lazyConnect: false })
    await io.ping()
    await measure('ioredis (sentinel)', (i, v) => io.set(key(i), v), (i) => io.get(key(i)))
    io.disconnect()

    const nr = await createSentinel({ name: info.service, sentinelRootNodes: sentinelsOf(info) })
      .on('error', () => {})
      .connect()
    await measure('node-redis (sentinel)', (i, v) => nr.set(key(i), v), (i) => nr.get(key(i)))
    await nr.close()

    const gl = await GlideClient.createClient({ addresses: [{ host: '127.0.0.1', port: info.primary.port }] })
    await measure('valkey-glide (direct)', (i, v) => gl.set(key(i), v), (i) => gl.get(key(i)))
    gl.close()

    for (const clients of [1, 64]) {
      const out = execFileSync('redis-benchmark', ['-p', String(info.primary.port), '-t', 'set,get', '-n', String(clients === 1 ? SEQ : CONC), '-c', String(clients), '-q', '-d', '16'], { encoding: 'utf8' })
      console.log(`redis-benchmark -c ${clients}: ${out.split(/[\r\n]+/).filter((l) => /requests per second/.test(l)).map((l) => l.trim()).join('; ')}`)
    }
  } finally {
    await topo.down()
  }
})().catch((e) => {
  console.error(e)
  process.exit(1)
})
