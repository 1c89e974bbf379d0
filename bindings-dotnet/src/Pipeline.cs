// Per-call deadlines with native cancellation, pipelines and transactions, over the C ABI's
// sr_client_execute_into / sr_client_pipeline_into / sr_client_transaction_begin_into. Every
// completion reaches the client's host mailbox and is taken on the sr-dotnet-host thread, where
// it only completes a TaskCompletionSource created with RunContinuationsAsynchronously.
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
            return StartInto(CopyReply, CancellationToken.None,
                (mailbox, id, op) => Native.sr_client_panic_for_test_into(_handle, mailbox, id));
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
        /// <see cref="BeginTransactionAsync"/>. <paramref name="timeout"/> (null:
        /// <c>command_timeout_ms</c>) bounds the whole transaction, from this call until EXEC's
        /// reply; past it the task faults with <see cref="SentinelTimeoutException"/> and the
        /// transaction's connection is closed (an EXEC sent but not answered in time may or may not
        /// have been applied). Cancelling the token cancels all of it. A command that can't run in
        /// a transaction (blocking commands, MULTI, ...) faults with <see cref="ConfigException"/>
        /// before anything is sent.
        /// </summary>
        /// <exception cref="ConfigException"><paramref name="timeout"/> is not more than zero and at
        /// most 2147483647 ms.</exception>
        public unsafe Task<RedisReply[]> TransactionAsync(IEnumerable<object[]> commands, object[] watch = null,
            TimeSpan? timeout = null, CancellationToken cancellationToken = default(CancellationToken))
        {
            if (commands == null) throw new ArgumentNullException("commands");
            ulong ms = timeout.HasValue ? TimeoutMs(timeout.Value) : 0;
            var all = commands.ToList();
            int n = all.Count;
            bool watching = watch != null && watch.Length > 0;
            if (watching) all.Add(watch);
            using (var pinned = new PinnedCommands(all))
            {
                var cmds = pinned.Commands;
                return StartInto(CopyExec, cancellationToken, (mailbox, id, op) =>
                {
                    var o = new Native.sr_call_options_t { timeout_ms = ms, operation = op };
                    var keys = watching ? cmds[n] : default(Native.sr_command_t);
                    fixed (Native.sr_command_t* pc = cmds)
                        return Native.sr_client_transaction_into(_handle, pc, (UIntPtr)(uint)n, keys.argc, keys.argv,
                            keys.argv_len, &o, mailbox, id);
                });
            }
        }

        /// <summary>
        /// Begins a transaction on a dedicated connection to the current primary (waiting for one
        /// like a command). Dispose it when done: that discards it unless
        /// <see cref="SentinelTransaction.ExecAsync"/> ran. <paramref name="timeout"/>, when given,
        /// bounds the whole transaction, from this call until EXEC completes: each step only has
        /// the time left, and one past it faults with <see cref="SentinelTimeoutException"/> and
        /// ends the transaction (its connection is closed; an EXEC sent but not answered in time may
        /// or may not have been applied). Null: the begin and each step get
        /// <c>command_timeout_ms</c> of their own.
        /// </summary>
        /// <exception cref="ConfigException"><paramref name="timeout"/> is not more than zero and at
        /// most 2147483647 ms.</exception>
        public unsafe Task<SentinelTransaction> BeginTransactionAsync(TimeSpan? timeout = null,
            CancellationToken cancellationToken = default(CancellationToken))
        {
            ulong ms = timeout.HasValue ? TimeoutMs(timeout.Value) : 0;
            return StartInto(d => new SentinelTransaction(Native.Delivery(d).transaction, this), cancellationToken,
                (mailbox, id, op) =>
                {
                    var o = new Native.sr_call_options_t { timeout_ms = ms, operation = op };
                    return Native.sr_client_transaction_begin_into(_handle, &o, mailbox, id);
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

        /// <summary>Starts a native call that completes into <paramref name="mailbox"/> as <paramref name="opId"/>.</summary>
        internal unsafe delegate int MailboxStarter(IntPtr mailbox, ulong opId, IntPtr* operation);

        /// <summary>Starts one native call whose completion reaches the client's mailbox and
        /// completes a <see cref="PendingOp{T}"/> on the host thread; <paramref name="convert"/>
        /// reads the delivery (<c>sr_delivery_t*</c>) of a call that succeeded.</summary>
        internal unsafe Task<T> StartInto<T>(Func<IntPtr, T> convert, CancellationToken ct, MailboxStarter call)
        {
            if (ct.IsCancellationRequested) return Canceled<T>();
            if (Volatile.Read(ref _disposed) != 0) return FaultedOf<T>(new ClientClosedException("the client was disposed"));
            var mailbox = _handle.Mailbox;
            if (mailbox == null) return FaultedOf<T>(new ClientClosedException("the client was disposed"));
            var op = new PendingOp<T>(convert);
            return op.StartInto(ct, mailbox, call);
        }

        /// <summary>The client's host mailbox; null once disposed.</summary>
        internal HostMailbox Mailbox
        {
            get { return Volatile.Read(ref _disposed) != 0 ? null : _handle.Mailbox; }
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

        internal static RedisReply CopyReply(IntPtr delivery) { return RedisReply.Copy(Native.Delivery(delivery).reply); }

        private static CommandResult[] CopyResults(IntPtr delivery) { return Results(Native.Delivery(delivery).results); }

        private static CommandResult[] Results(IntPtr results)
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
        internal static RedisReply[] CopyExec(IntPtr delivery)
        {
            IntPtr results = Native.Delivery(delivery).results;
            if (results == IntPtr.Zero) return null;
            return Results(results).Select(r => r.Reply).ToArray();
        }
    }

    /// <summary>A native call in flight: its task, and its cancel handle while it may run.</summary>
    internal abstract class PendingOp
    {
        /// <summary>The library's <c>sr_operation_t</c>; freed (under the lock) once the task completed.</summary>
        internal IntPtr Operation;
        internal CancellationTokenRegistration Registration;

        /// <summary>On the host thread, with the call's delivery (<c>sr_delivery_t*</c>): converts
        /// and completes the task (unless cancelled already). Returns whether it took what the
        /// delivery hands over (a subscription, a transaction); if not, the caller frees that.</summary>
        internal abstract bool Complete(IntPtr delivery);

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

        /// <summary>An accepted call: keeps its cancel handle and wires cancellation.</summary>
        /// <summary>The task of a call the library accepted, cancelled through <paramref name="native"/>
        /// (its <c>sr_operation_t</c>, or zero) when <paramref name="ct"/> is.</summary>
        internal Task<T> Started(CancellationToken ct, IntPtr native)
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

        internal override bool Complete(IntPtr delivery)
        {
            if (_tcs.Task.IsCompleted) return false; // cancelled: the result is discarded
            try
            {
                IntPtr error = Native.Delivery(delivery).error;
                if (error != IntPtr.Zero) _tcs.TrySetException(SentinelRecoveryException.FromNative(error));
                else _tcs.TrySetResult(_convert(delivery));
                return true;
            }
            catch (Exception e)
            {
                _tcs.TrySetException(e);
                return false;
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
