package gpuworker

import "sync/atomic"

// mailboxDepth counts the messages waiting in the GPU actor's mailbox, for
// metrics: posted minus received, user and system messages alike. It is a
// protoactor-go actor.MailboxMiddleware; the counter is only read, never used
// to synchronise.
type mailboxDepth struct{ n atomic.Int64 }

func (d *mailboxDepth) MailboxStarted()     {}
func (d *mailboxDepth) MessagePosted(any)   { d.n.Add(1) }
func (d *mailboxDepth) MessageReceived(any) { d.n.Add(-1) }
func (d *mailboxDepth) MailboxEmpty()       {}
func (d *mailboxDepth) load() int64         { return d.n.Load() }
