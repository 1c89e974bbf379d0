'use strict'
/**
 * The completion dispatcher: a client's pending operations, and the typed batches that settle
 * them (docs/architecture.md, Node, follows one completion from the core to its promise).
 *
 * Each operation has a u32 id (never 0) and a promise. The native side wakes JavaScript with
 * `(columns, count, first, rest)` (src/batch.rs): `count` items, item 0's value `first`, item
 * i's `rest[i - 1]` (no array for a batch of one); item i is of kind `columns.kinds[i]`, for the
 * operation `columns.ids[i]`; a `Bytes` item is a small Buffer reply, `lengths[i]` bytes at
 * `offsets[i]` of the ArrayBuffer that is its value (as Node's own small Buffers share a pool).
 * The next batch reuses the columns, so they are read here and nowhere else.
 */

const native = require('./native.js')
const { fromNative } = require('./errors_by_code.js')
const { abortError } = require('./abort.js')

const RESOLVED = native.BatchKind.Resolved
const REJECTED = native.BatchKind.Rejected
const BYTES = native.BatchKind.Bytes
const EVENT = native.BatchKind.Event

/**
 * The Operations of clients with pending operations: only these clients are kept reachable (a
 * pending command keeps its client, and the process, alive).
 */
const busy = new Set()

/** A client's pending operations. `onEvent(json)` takes the events that come with them. */
class Operations {
  constructor(onEvent) {
    /** The NativeClient, once opened (see `attach`). */
    this._native = null
    /** Pending operations by id: {resolve, reject, cleanup}. */
    this._pending = new Map()
    this._next = 1
    this._onEvent = onEvent
    /** The native wake function is referenced (it keeps the process alive). */
    this._held = false
    this._releaseQueued = false
    this._releaseIfIdle = () => {
      this._releaseQueued = false
      if (this._held && this._pending.size === 0) {
        this._held = false
        busy.delete(this)
        this._native.hold(false)
      }
    }
  }

  attach(nativeClient) {
    this._native = nativeClient
  }

  /**
   * Starts one native operation (`begin(id)`) and returns the promise it settles. With `signal`,
   * `begin` returns the native operation, cancelled (and the promise rejected) when it fires.
   */
  start(begin, signal = undefined) {
    const op = this._next++
    if (this._next > 0xffffffff) this._next = 1
    let entry
    const promise = new Promise((resolve, reject) => {
      entry = { resolve, reject, cleanup: null }
    })
    this._pending.set(op, entry)
    if (!this._held) {
      this._held = true
      busy.add(this)
      this._native.hold(true)
    }
    let started
    try {
      started = begin(op)
    } catch (e) {
      this._pending.delete(op)
      entry.reject(fromNative(e))
      this._release()
      return promise
    }
    if (signal !== undefined && started && this._pending.get(op) === entry) {
      const onAbort = () => {
        if (this._pending.get(op) !== entry) return
        this._pending.delete(op)
        // The core completes the cancelled operation too (with `closed`), which then finds no
        // pending entry.
        started.cancel()
        entry.reject(abortError(signal))
        this._release()
      }
      signal.addEventListener('abort', onAbort, { once: true })
      entry.cleanup = () => signal.removeEventListener('abort', onAbort)
    }
    return promise
  }

  /** Settles and emits what a batch holds, in the order the core produced it. */
  deliver(columns, count, first, rest) {
    const { ids, kinds, offsets, lengths } = columns
    for (let i = 0; i < count; i++) {
      const value = i === 0 ? first : rest[i - 1]
      switch (kinds[i]) {
        case RESOLVED:
          this._complete(ids[i], true, value)
          break
        case REJECTED:
          this._complete(ids[i], false, value)
          break
        case BYTES:
          this._complete(ids[i], true, Buffer.from(value, offsets[i], lengths[i]))
          break
        case EVENT:
          this._onEvent(value)
          break
      }
    }
    this._release()
  }

  /**
   * Settles operation `id`. The core completes each operation once; only one aborted here has
   * settled already, and its completion (`closed`) finds no pending entry.
   */
  _complete(id, ok, value) {
    const p = this._pending.get(id)
    if (p === undefined) return
    this._pending.delete(id)
    if (p.cleanup !== null) p.cleanup()
    if (ok) p.resolve(value)
    else p.reject(value)
  }

  /**
   * Lets the client go (unreferenced, collectable) once nothing is pending. Checked in a
   * microtask, after those of the settled promises: code that awaits one command and sends the
   * next finds the client still held, which spares two native calls per command.
   */
  _release() {
    if (this._held && !this._releaseQueued && this._pending.size === 0) {
      this._releaseQueued = true
      queueMicrotask(this._releaseIfIdle)
    }
  }
}

/**
 * The wake function of `client` (whose Operations are `client._ops`): it holds the client only
 * weakly, so a client let go of can be collected (and is then closed by the native side), and a
 * batch of a collected client has no one left to settle.
 */
function wakeFunction(client) {
  const ref = new WeakRef(client)
  return (columns, count, first, rest) => {
    const c = ref.deref()
    if (c !== undefined && c._native) c._ops.deliver(columns, count, first, rest)
  }
}

module.exports = { Operations, wakeFunction }
