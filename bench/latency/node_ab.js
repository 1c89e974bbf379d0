'use strict'
// Paired A/B of sequential GET latency and CPU for Node, one fresh process per run:
//
//   node node_ab.js sr ADDON_DIR URL N     # ADDON_DIR holds index.js + native.js + the .node file
//   node node_ab.js io PORT N              # ioredis from bench/node/node_modules, direct
//
// SETs the key, does 2 000 untimed GETs, then N timed ones (one at a time, awaiting each), and
// prints one JSON line: mean and p50 µs per GET, the process's user and system CPU µs per GET
// (process.resourceUsage) and each thread's CPU µs per GET (/proc/self/task/*/schedstat).
// Run it alternating the order of the variants compared (the machine is noisy).
const fs = require('node:fs')
const path = require('node:path')

const KEY = 'key:__rand_int__'

/** CPU ns used so far by each thread of this process, by "tid:name". */
function threadCpu() {
  const m = {}
  for (const t of fs.readdirSync('/proc/self/task')) {
    try {
      const name = fs.readFileSync(`/proc/self/task/${t}/comm`, 'utf8').trim()
      m[`${t}:${name}`] = Number(fs.readFileSync(`/proc/self/task/${t}/schedstat`, 'utf8').split(' ')[0])
    } catch {
      // The thread ended meanwhile.
    }
  }
  return m
}

async function main() {
  const [kind, a, b, c] = process.argv.slice(2)
  let get, close, n
  if (kind === 'sr') {
    const sr = require(path.resolve(a))
    const client = await sr.Client.connect(b)
    await client.execute(['SET', KEY, 'xxx'])
    get = () => client.execute(['GET', KEY])
    close = () => client.close()
    n = Number(c)
  } else if (kind === 'io') {
    const from = { paths: [path.join(__dirname, '..', 'node')] }
    const Redis = require(require.resolve('ioredis', from))
    const io = new Redis({ host: '127.0.0.1', port: Number(a) })
    await io.set(KEY, 'xxx')
    get = () => io.get(KEY)
    close = async () => io.disconnect()
    n = Number(b)
  } else {
    throw new Error(`node_ab: unknown kind ${kind}`)
  }
  for (let i = 0; i < 2000; i++) await get()
  const lat = new Float64Array(n)
  const cpu0 = threadCpu()
  const r0 = process.resourceUsage()
  const t0 = process.hrtime.bigint()
  for (let i = 0; i < n; i++) {
    const s = process.hrtime.bigint()
    await get()
    lat[i] = Number(process.hrtime.bigint() - s)
  }
  const total = Number(process.hrtime.bigint() - t0)
  const r1 = process.resourceUsage()
  const cpu1 = threadCpu()
  lat.sort()
  const perGet = (x) => +(x / n).toFixed(2)
  const threads = {}
  for (const k in cpu1) {
    const us = (cpu1[k] - (cpu0[k] || 0)) / 1000
    if (us / n > 0.05) threads[k] = perGet(us)
  }
  console.log(JSON.stringify({
    kind,
    variant: kind === 'sr' ? a : 'ioredis',
    mean_us: perGet(total / 1000),
    p50_us: +(lat[n >> 1] / 1000).toFixed(2),
    user_us: perGet(r1.userCPUTime - r0.userCPUTime),
    sys_us: perGet(r1.systemCPUTime - r0.systemCPUTime),
    threads,
  }))
  await close()
}

main().catch((e) => {
  console.error(e)
  process.exit(1)
})
