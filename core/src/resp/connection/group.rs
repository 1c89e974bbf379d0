//! Group commit on one connection: a command sent with [`Connection::call_in_group`] is written
//! followed by a trailer (a `WAIT`), and gets its reply together with the trailer's. Commands
//! sent while a trailer is outstanding are held, then written together when it is answered,
//! followed by one new trailer: under load one trailer serves a whole batch, and a trailer never
//! answers for a command written after it.

use std::sync::{Arc, Mutex};

use bytes::Bytes;

use super::handle::{Connection, Own};
use super::outbox::Waiter;
use super::shared::{GroupDone, GroupReply, Member};
use crate::error::Result;
use crate::resp::Value;
use crate::sync::Locked;

/// The replies of one written batch, filled in reply order.
struct Batch {
    replies: Mutex<Vec<Option<Result<Value>>>>,
    /// Taken by the trailer's reply, or by a failed write (nothing sent).
    dones: Mutex<Option<Vec<GroupDone>>>,
}

impl Connection {
    /// Sends `command` (one encoded command) in this connection's group with `trailer` (one
    /// encoded command) after it, and calls `done` once: with the command's reply and the
    /// reply of the first trailer written after it, or with [`GroupReply::NotSent`] when the
    /// connection had ended first. Never waits. `done` runs on the connection's core thread (or
    /// the calling thread, for `NotSent`): it must be quick and must not wait.
    ///
    /// Replies come in the order the commands were sent. Every command of a connection's group
    /// gets the same trailer (the first one given while none was outstanding is used for the
    /// whole run); commands sent otherwise on the connection are not delayed by the group.
    pub fn call_in_group(
        &self,
        command: Bytes,
        trailer: Bytes,
        done: impl FnOnce(GroupReply) + Send + 'static,
    ) {
        let member = Member {
            command,
            done: Box::new(done),
        };
        {
            let mut group = self.shared.group.locked();
            if group.outstanding {
                group.queued.push(member);
                return;
            }
            group.outstanding = true;
        }
        self.write_batch(vec![member], trailer);
    }

    /// Writes `members` and one trailer; when the trailer is answered, hands every member its
    /// replies and writes what queued meanwhile.
    fn write_batch(&self, mut members: Vec<Member>, trailer: Bytes) {
        loop {
            let batch = Arc::new(Batch {
                replies: Mutex::new((0..members.len()).map(|_| None).collect()),
                dones: Mutex::new(None),
            });
            let mut commands = Vec::with_capacity(members.len());
            let mut dones = Vec::with_capacity(members.len());
            for member in members {
                commands.push(member.command);
                dones.push(member.done);
            }
            *batch.dones.locked() = Some(dones);
            let answered = batch.clone();
            let next = self.clone();
            let next_trailer = trailer.clone();
            let written = self.submit(
                |out| {
                    for (i, command) in commands.iter().enumerate() {
                        out.bytes.extend_from_slice(command);
                        let batch = batch.clone();
                        out.waiters.push_back(Waiter::Call {
                            done: Some(Box::new(move |reply| {
                                batch.replies.locked()[i] = Some(reply);
                            })),
                            deadline: None,
                        });
                    }
                    out.bytes.extend_from_slice(&trailer);
                    out.waiters.push_back(Waiter::Call {
                        done: Some(Box::new(move |reply| {
                            answer(&answered, reply, &next);
                            next.write_next(next_trailer);
                        })),
                        deadline: None,
                    });
                },
                Own::No,
            );
            if written.is_ok() {
                return;
            }
            // Ended before anything was handed over: neither these nor the queued ones run.
            let not_sent = batch.dones.locked().take().unwrap_or_default();
            for done in not_sent {
                done(GroupReply::NotSent);
            }
            let mut group = self.shared.group.locked();
            if group.queued.is_empty() {
                group.outstanding = false;
                return;
            }
            members = std::mem::take(&mut group.queued);
        }
    }

    /// After a trailer's reply: writes the commands queued meanwhile, or ends the run.
    fn write_next(&self, trailer: Bytes) {
        let members = {
            let mut group = self.shared.group.locked();
            if group.queued.is_empty() {
                group.outstanding = false;
                return;
            }
            std::mem::take(&mut group.queued)
        };
        self.write_batch(members, trailer);
    }
}

/// Hands each member of `batch` its reply with the trailer's.
fn answer(batch: &Batch, trailer: Result<Value>, conn: &Connection) {
    let dones = batch.dones.locked().take().unwrap_or_default();
    let replies = std::mem::take(&mut *batch.replies.locked());
    for (done, reply) in dones.into_iter().zip(replies) {
        done(GroupReply::Replied {
            reply: reply.unwrap_or_else(|| Err(conn.lost())),
            trailer: trailer.clone(),
        });
    }
}
