// Per-call deadlines with native cancellation, pipelines and transactions, over the C ABI's
// sr_client_execute_with / sr_client_pipeline / sr_client_transaction_begin. Completions arrive
// on core threads and only complete a TaskCompletionSource created with
// RunContinuationsAsynchronously, as every other completion of this wrapper.
using System;
using System.Collections.Generic;
using System.Linq;
using System.Runtime.InteropServices;
using System.Threading;
using System.Threading.Tasks;

namespace SentinelRecovery
{
    /// <summary>One command's result in a pipeline: its reply, or its own error (not thrown).</summary>
    public sealed class CommandResult
    {
        internal CommandResult(RedisReply reply, SentinelRecoveryException error)
        {
            Reply = reply;
            Error = error;
        }

        /// <summary>The reply; null when the command failed.</summary>
        public RedisReply Reply { get; }

        /// <summary>The command's error (e.g. a <see cref="ServerException"/> for WRONGTYPE); null on success.</summary>
        public SentinelRecoveryException Error { get; }

        /// <summary>Whether the command failed.</summary>
        public bool IsError { get { return Error != null; } }
    }

    public sealed partial class SentinelClient
    {
        private static readonly Native.ReplyCallback OpReplyCallback = OnOpCompleted;
        private static readonly Native.ResultsCallback OpResultsCallback = OnOpCompleted;
        private static readonly Native.TransactionCallback OpTransactionCallback = OnOpCompleted;
        internal static readonly IntPtr OpReplyPtr = Marshal.GetFunctionPointerForDelegate(OpReplyCallback);
        internal static readonly IntPtr OpResultsPtr = Marshal.GetFunctionPointerForDelegate(OpResultsCallback);
        internal static readonly IntPtr OpTransactionPtr = Marshal.GetFunctionPointerForDelegate(OpTransactionCallback);

        /// <summary>
        /// Sends one command with a deadline of its own instead of the client's
        /// <c>command_timeout_ms</c>; past it the task faults with
        /// <see cref="SentinelTimeoutException"/>. It ends blocking commands too (BLPOP k 0 included:
        /// their connection is closed, so the server stops blocking them).
        /// </summary>
        /// <exception cref="ConfigException"><paramref name="timeout"/> is not more than zero and at
        /// most 2147483647 ms (the rule every binding shares).</exception>
        public Task<RedisReply> ExecuteAsync(TimeSpan timeout, params object[] args)
        {
            return ExecuteAsync(timeout, CancellationToken.None, args);
        }

        /// <summary>
        /// As <see cref="ExecuteAsync(TimeSpan, object[])"/>, cancellable: cancelling the token
        /// cancels the task at once and the command in the library. A command already sent may
        /// still have run on the server; it is never retried.
        /// </summary>
        public Task<RedisReply> ExecuteAsync(TimeSpan timeout, CancellationToken cancellationToken, params object[] args)
        {
            return ExecuteWith(TimeoutMs(timeout), cancellationToken, args);
        }

        /// <summary>One command with a deadline in ms (0: the client's) and native cancellation.</summary>
        private unsafe Task<RedisReply> ExecuteWith(ulong ms, CancellationToken cancellationToken, object[] args)
        {
            using (var pinned = new PinnedCommands(new[] { args }))
            {
                var c = pinned.Commands[0];
                return StartInto(CopyReply, cancellationToken, (mailbox, id, op) =>
                {
                    var o = new Native.sr_call_options_t { timeout_ms = ms, operation = op };
                    return Native.sr_client_execute_into(_handle, c.argc, c.argv, c.argv_len, &o, mailbox, id);
                });
            }
        }

        /// <summary>For the test suite only: an operation whose work panics on a core thread;
        /// the task fails with <see cref="InternalException"/>, once, and the client goes on.</summary>
        internal unsafe Task<RedisReply> PanicForTestAsync()
        {
            return Start(CopyReply, CancellationToken.None,
                (ud, op) => Native.sr_client_panic_for_test(_handle, OpReplyPtr, ud));
        }

        /// <summary>
        /// Sends <paramref name="commands"/> (each: name, then its arguments, as for
        /// <see cref="ExecuteAsync(object[])"/>) back to back on one connection and completes
        /// with one <see cref="CommandResult"/> per command, in order: its reply or its own error.
        /// Not atomic (see <see cref="TransactionAsync"/>). Faults only when the pipeline failed
        /// as a whole: no primary by the deadline, or a command a pipeline can't carry (BLPOP,
        /// MULTI, ...: <see cref="ConfigException"/>, nothing sent). <paramref name="timeout"/> is
        /// the whole pipeline's deadline (null: <c>command_timeout_ms</c>); cancelling the token
        /// cancels it (commands already sent may have run; nothing is retried).
        /// </summary>
        public unsafe Task<CommandResult[]> PipelineAsync(IEnumerable<object[]> commands, TimeSpan? timeout = null,
            CancellationToken cancellationToken = default(CancellationToken))
        {
            if (commands == null) throw new ArgumentNullException("commands");
            ulong ms = timeout.HasValue ? TimeoutMs(timeout.Value) : 0;
            using (var pinned = new PinnedCommands(commands.ToList()))
            {
                var cmds = pinned.Commands;
                return StartInto(CopyResults, cancellationToken, (mailbox, id, op) =>
                {
                    var o = new Native.sr_call_options_t { timeout_ms = ms, operation = op };
                    fixed (Native.sr_command_t* pc = cmds)
                        return Native.sr_client_pipeline_into(_handle, pc, (UIntPtr)(uint)cmds.Length, &o, mailbox, id);
                });
            }
        }

        /// <summary>
        /// Runs <paramref name="commands"/> atomically (MULTI ... EXEC) on a dedicated connection to
        /// the primary, after <c>WATCH</c> of <paramref name="watch"/> when given. Completes with
        /// one reply per command (a command failing inside EXEC is a reply of type
        /// <see cref="ReplyType.Error"/>), or null when a watched key changed (nothing ran).
        /// Faults with <see cref="ConnectionLostException"/> ("nothing was applied") when the
        /// primary changed meanwhile. To read watched keys before EXEC use
        /// <see cref="BeginTransactionAsync"/>.
        /// </summary>
        public async Task<RedisReply[]> TransactionAsync(IEnumerable<object[]> commands, object[] watch = null,
            CancellationToken cancellationToken = default(CancellationToken))
        {
            using (var tx = await BeginTransactionAsync(cancellationToken).ConfigureAwait(false))
            {
                if (watch != null && watch.Length > 0) await tx.WatchAsync(watch).ConfigureAwait(false);
                return await tx.ExecAsync(commands).ConfigureAwait(false);
            }
        }

        /// <summary>
        /// Begins a transaction on a dedicated connection to the current primary (waiting for one
        /// like a command). Dispose it when done: that discards it unless
        /// <see cref="SentinelTransaction.ExecAsync"/> ran.
        /// </summary>
        public unsafe Task<SentinelTransaction> BeginTransactionAsync(CancellationToken cancellationToken = default(CancellationToken))
        {
            return Start(tx => new SentinelTransaction(tx), cancellationToken, (ud, op) =>
            {
                var o = new Native.sr_call_options_t { timeout_ms = 0, operation = op };
                return Native.sr_client_transaction_begin(_handle, &o, OpTransactionPtr, ud);
            });
        }

        internal static void EncodeArgs(object[] args, out byte[] buf, out int[] lens)
        {
            Encode(args, out buf, out lens);
        }

        /// <summary>A call's own timeout under the rule every binding shares (the core's, through
        /// sr_call_timeout_ms): more than zero and at most 2147483647 ms, else <see cref="ConfigException"/>
        /// naming the value, nothing sent.</summary>
        private static ulong TimeoutMs(TimeSpan timeout)
        {
            ulong ms;
            IntPtr error;
            int rc = Native.sr_call_timeout_ms(timeout.TotalMilliseconds, out ms, out error);
            if (rc != Native.SR_OK) throw SentinelRecoveryException.TakeNative(rc, error);
            return ms;
        }

        internal unsafe delegate int Starter(IntPtr userData, IntPtr* operation);

        /// <summary>Starts a native call that completes into <paramref name="mailbox"/> as <paramref name="opId"/>.</summary>
        internal unsafe delegate int MailboxStarter(IntPtr mailbox, ulong opId, IntPtr* operation);

        /// <summary>Starts one native call whose completion reaches the client's mailbox and
        /// completes a <see cref="PendingOp{T}"/> on the host thread.</summary>
        internal unsafe Task<T> StartInto<T>(Func<IntPtr, T> convert, CancellationToken ct, MailboxStarter call)
        {
            if (ct.IsCancellationRequested) return Canceled<T>();
            if (Volatile.Read(ref _disposed) != 0) return FaultedOf<T>(new ClientClosedException("the client was disposed"));
            var mailbox = _handle.Mailbox;
            if (mailbox == null) return FaultedOf<T>(new ClientClosedException("the client was disposed"));
            var op = new PendingOp<T>(convert);
            return op.StartInto(ct, mailbox, call);
        }

        /// <summary>Starts one native call whose callback completes a <see cref="PendingOp{T}"/>.</summary>
        internal unsafe Task<T> Start<T>(Func<IntPtr, T> convert, CancellationToken ct, Starter call)
        {
            if (ct.IsCancellationRequested) return Canceled<T>();
            if (Volatile.Read(ref _disposed) != 0) return FaultedOf<T>(new ClientClosedException("the client was disposed"));
            var op = new PendingOp<T>(convert);
            return op.Start(ct, call);
        }

        internal static Task<T> Canceled<T>()
        {
            var t = new TaskCompletionSource<T>();
            t.SetCanceled();
            return t.Task;
        }

        internal static Task<T> FaultedOf<T>(Exception e)
        {
            var t = new TaskCompletionSource<T>();
            t.SetException(e);
            return t.Task;
        }

        private static RedisReply CopyReply(IntPtr reply) { return RedisReply.Copy(reply); }

        private static CommandResult[] CopyResults(IntPtr results)
        {
            int n = (int)(uint)Native.sr_results_len(results);
            var out_ = new CommandResult[n];
            for (int i = 0; i < n; i++)
            {
                IntPtr e = Native.sr_results_error(results, (UIntPtr)(uint)i);
                out_[i] = e != IntPtr.Zero
                    ? new CommandResult(null, SentinelRecoveryException.FromNative(e))
                    : new CommandResult(RedisReply.Copy(Native.sr_results_reply(results, (UIntPtr)(uint)i)), null);
            }
            return out_;
        }

        /// <summary>EXEC's replies; null when a watched key changed (the library passes no results and no error).</summary>
        internal static RedisReply[] CopyExec(IntPtr results)
        {
            if (results == IntPtr.Zero) return null;
            return CopyResults(results).Select(r => r.Reply).ToArray();
        }

        // ---- the one static thunk behind every PendingOp: copy, complete, return; never throw ----

        private static void OnOpCompleted(IntPtr userData, IntPtr value, IntPtr error)
        {
            try
            {
                var gch = GCHandle.FromIntPtr(userData);
                var op = (PendingOp)gch.Target;
                gch.Free(); // exactly once: the library calls back once per accepted call
                op.Complete(value, error);
            }
            catch
            {
                // Nothing may unwind into native code.
            }
        }
    }

    /// <summary>A native call in flight: its task, and its cancel handle while it may run.</summary>
    internal abstract class PendingOp
    {
        /// <summary>The library's <c>sr_operation_t</c>; freed (under the lock) once the task completed.</summary>
        internal IntPtr Operation;
        internal CancellationTokenRegistration Registration;

        /// <summary>On a core thread (callback form) or the host thread (mailbox form): converts and
        /// completes the task (unless cancelled already).</summary>
        internal abstract void Complete(IntPtr value, IntPtr error);

        /// <summary>Fails the task with <paramref name="e"/> (unless it completed already).</summary>
        internal abstract void Fail(Exception e);
    }

    internal sealed class PendingOp<T> : PendingOp
    {
        private static readonly Action<object> CancelOp = s =>
        {
            var op = (PendingOp<T>)s;
            // Cancelled first: the library then completes the operation (with closed), which finds
            // the task done and is discarded.
            op._tcs.TrySetCanceled();
            lock (op)
            {
                if (op.Operation != IntPtr.Zero) Native.sr_operation_cancel(op.Operation);
            }
        };

        private static readonly Action<Task<T>, object> Finish = (t, s) =>
        {
            var op = (PendingOp<T>)s;
            op.Registration.Dispose();
            lock (op)
            {
                if (op.Operation != IntPtr.Zero) Native.sr_operation_free(op.Operation);
                op.Operation = IntPtr.Zero;
            }
        };

        private readonly TaskCompletionSource<T> _tcs =
            new TaskCompletionSource<T>(TaskCreationOptions.RunContinuationsAsynchronously);
        private readonly Func<IntPtr, T> _convert;

        internal PendingOp(Func<IntPtr, T> convert) { _convert = convert; }

        internal unsafe Task<T> Start(CancellationToken ct, SentinelClient.Starter call)
        {
            var gch = GCHandle.Alloc(this);
            IntPtr native = IntPtr.Zero;
            int rc;
            try
            {
                rc = call(GCHandle.ToIntPtr(gch), &native);
            }
            catch (ObjectDisposedException)
            {
                rc = (int)ErrorCode.Closed;
            }
            catch
            {
                gch.Free();
                throw;
            }
            if (rc != Native.SR_OK)
            {
                // Not accepted: the callback will never run, so the handle is ours to free.
                gch.Free();
                return SentinelClient.FaultedOf<T>(SentinelRecoveryException.Create((ErrorCode)rc,
                    rc == (int)ErrorCode.Closed ? "the client was disposed" : Native.Utf8(Native.sr_error_message(rc))));
            }
            return Started(ct, native);
        }

        /// <summary>An accepted call: keeps its cancel handle and wires cancellation.</summary>
        private Task<T> Started(CancellationToken ct, IntPtr native)
        {
            lock (this) Operation = native;
            if (ct.CanBeCanceled) Registration = ct.Register(CancelOp, this);
            // On the pool once the task completes: never on a core thread, where disposing the
            // registration could wait for a running cancellation callback.
            _tcs.Task.ContinueWith(Finish, this, CancellationToken.None,
                TaskContinuationOptions.ExecuteSynchronously, TaskScheduler.Default);
            return _tcs.Task;
        }

        internal unsafe Task<T> StartInto(CancellationToken ct, HostMailbox mailbox, SentinelClient.MailboxStarter call)
        {
            ulong id = mailbox.Register(this);
            IntPtr native = IntPtr.Zero;
            int rc;
            try
            {
                rc = call(mailbox.Pointer, id, &native);
            }
            catch (ObjectDisposedException)
            {
                rc = (int)ErrorCode.Closed;
            }
            catch
            {
                mailbox.Unregister(id);
                throw;
            }
            if (rc != Native.SR_OK)
            {
                // Not accepted: no completion will come, so the entry is ours to remove.
                mailbox.Unregister(id);
                return SentinelClient.FaultedOf<T>(SentinelRecoveryException.Create((ErrorCode)rc,
                    rc == (int)ErrorCode.Closed ? "the client was disposed" : Native.Utf8(Native.sr_error_message(rc))));
            }
            return Started(ct, native);
        }

        internal override void Fail(Exception e) { _tcs.TrySetException(e); }

        internal override void Complete(IntPtr value, IntPtr error)
        {
            if (_tcs.Task.IsCompleted) return; // cancelled: the result is discarded
            try
            {
                if (error != IntPtr.Zero) _tcs.TrySetException(SentinelRecoveryException.FromNative(error));
                else _tcs.TrySetResult(_convert(value));
            }
            catch (Exception e)
            {
                _tcs.TrySetException(e);
            }
        }
    }

    /// <summary>Commands encoded and pinned for the duration of one native call (the library copies them).</summary>
    internal sealed unsafe class PinnedCommands : IDisposable
    {
        private readonly List<GCHandle> _pins = new List<GCHandle>();
        internal readonly Native.sr_command_t[] Commands;

        internal PinnedCommands(IList<object[]> commands)
        {
            Commands = new Native.sr_command_t[commands.Count];
            try
            {
                for (int i = 0; i < commands.Count; i++)
                {
                    byte[] buf;
                    int[] lens;
                    SentinelClient.EncodeArgs(commands[i], out buf, out lens);
                    var argv = new IntPtr[lens.Length];
                    var argvLen = new UIntPtr[lens.Length];
                    var b = Pin(buf);
                    int pos = 0;
                    for (int j = 0; j < lens.Length; j++)
                    {
                        argv[j] = b + pos;
                        argvLen[j] = (UIntPtr)(uint)lens[j];
                        pos += lens[j];
                    }
                    Commands[i].argc = (UIntPtr)(uint)lens.Length;
                    Commands[i].argv = (IntPtr*)Pin(argv);
                    Commands[i].argv_len = (UIntPtr*)Pin(argvLen);
                }
            }
            catch
            {
                Dispose();
                throw;
            }
        }

        private IntPtr Pin(object array)
        {
            var h = GCHandle.Alloc(array, GCHandleType.Pinned);
            _pins.Add(h);
            return h.AddrOfPinnedObject();
        }

        public void Dispose()
        {
            foreach (var h in _pins) h.Free();
            _pins.Clear();
        }
    }
}
