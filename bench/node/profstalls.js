'use strict'
// Where did the event loop stall? Reads a .cpuprofile (node --cpu-prof) and prints the longest
// stretches of consecutive non-idle samples on the main thread (JavaScript or native work that
// kept the loop from turning) with the functions sampled most in each, and the longest gaps
// between samples (the thread, or the whole process, not running: descheduled by the OS).
// Usage: node profstalls.js FILE.cpuprofile [TOP=5]
const fs = require('node:fs')
const prof = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'))
const top = Number(process.argv[3] || 5)
const byId = new Map(prof.nodes.map((n) => [n.id, n]))
const parent = new Map()
for (const n of prof.nodes) for (const c of n.children || []) parent.set(c, n.id)
const name = (id) => {
  const cf = byId.get(id).callFrame
  return `${cf.functionName || '(anon)'} ${cf.url.split('/').slice(-2).join('/')}:${cf.lineNumber + 1}`
}
const stack = (id) => {
  const out = []
  for (let x = id; x !== undefined && out.length < 6; x = parent.get(x)) {
    const fn = byId.get(x).callFrame.functionName
    if (fn === '(root)') break
    out.push(fn || '(anon)')
  }
  return out.join(' < ')
}
const idle = (id) => ['(idle)', '(program)', '(garbage collector)'].includes(byId.get(id).callFrame.functionName)
  ? byId.get(id).callFrame.functionName
  : null
let t = prof.startTime
const samples = prof.samples.map((id, i) => ((t += prof.timeDeltas[i] || 0), { id, t }))
const stretches = []
let cur = null
for (let i = 0; i < samples.length; i++) {
  const s = samples[i]
  const kind = idle(s.id)
  if (kind === '(idle)') {
    if (cur) stretches.push(cur), (cur = null)
    continue
  }
  if (!cur) cur = { start: i > 0 ? samples[i - 1].t : s.t, end: s.t, ids: [] }
  cur.end = s.t
  cur.ids.push(s.id)
}
if (cur) stretches.push(cur)
stretches.sort((a, b) => b.end - b.start - (a.end - a.start))
console.log(`profile: ${((samples[samples.length - 1].t - prof.startTime) / 1e6).toFixed(1)} s, ${samples.length} samples`)
console.log(`\nlongest busy stretches (non-idle samples in a row; GC and (program) count as busy):`)
for (const s of stretches.slice(0, top)) {
  const counts = new Map()
  for (const id of s.ids) counts.set(stack(id), (counts.get(stack(id)) || 0) + 1)
  const best = [...counts.entries()].sort((a, b) => b[1] - a[1]).slice(0, 3)
  console.log(`  ${((s.end - s.start) / 1000).toFixed(1)} ms at +${((s.start - prof.startTime) / 1e6).toFixed(2)} s, ${s.ids.length} samples:`)
  for (const [k, n] of best) console.log(`      ${n} × ${k}`)
}
const gaps = samples.map((s, i) => ({ t: s.t, d: prof.timeDeltas[i] || 0 })).sort((a, b) => b.d - a.d).slice(0, top)
console.log(`\nlongest gaps between samples (thread not running):`)
for (const g of gaps) console.log(`  ${(g.d / 1000).toFixed(1)} ms ending at +${((g.t - prof.startTime) / 1e6).toFixed(2)} s`)
