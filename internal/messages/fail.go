package messages

// Failer is a request the GPU actor can answer with an error alone: when a
// request cannot be carried out to its end — the goroutine running it was
// ended by runtime.Goexit, in a forward step or in the backend — the actor
// answers it through Fail, so that no caller waits for a reply that will
// never come. Every request to the GPU actor whose reply carries an error
// implements it; Fail sends one reply and must be called at most once per
// request, instead of the normal reply.
type Failer interface {
	Fail(err error)
}

// Fail answers the request with err.
func (m *Ping) Fail(err error) { m.Reply <- err }

// Fail answers the request with err and no pointer.
func (m *Alloc) Fail(err error) { m.Reply <- AllocReply{Err: err} }

// Fail answers the request with err and no pointers.
func (m *AllocBatch) Fail(err error) { m.Reply <- AllocBatchReply{Err: err} }

// Fail answers the request with err.
func (m *Free) Fail(err error) { m.Reply <- err }

// Fail answers the request with err; every pointer is reported as possibly
// still held (the ledger tells which are).
func (m *FreeBatch) Fail(err error) { m.Reply <- FreeBatchReply{Failed: m.Ptrs, Err: err} }

// Fail answers the request with err.
func (m *FreeOwner) Fail(err error) { m.Reply <- FreeOwnerReply{Err: err} }

// Fail answers the request with err.
func (m *Memset) Fail(err error) { m.Reply <- err }

// Fail answers the request with err.
func (m *CopyHtoD) Fail(err error) { m.Reply <- err }

// Fail answers the request with err; a buffer it was to page-lock is
// reported as possibly locked, so the loader still unlocks it.
func (m *CopyHtoDStaged) Fail(err error) {
	m.Reply <- CopyHtoDStagedReply{Pinned: m.Register, Err: err}
}

// Fail answers the request with err.
func (m *StagingUnregister) Fail(err error) { m.Reply <- err }

// Fail answers the request with err and no data.
func (m *CopyDtoH) Fail(err error) { m.Reply <- CopyDtoHReply{Err: err} }

// Fail answers the request with err.
func (m *CopyDtoD) Fail(err error) { m.Reply <- err }

// Fail answers the request with err.
func (m *MemInfo) Fail(err error) { m.Reply <- MemInfoReply{Err: err} }

// Fail answers the request with err.
func (m *Forward) Fail(err error) { m.Reply <- ForwardReply{Err: err} }

// Fail answers the request with err.
func (m *AddView) Fail(err error) { m.Reply <- err }

// Fail answers the request with err.
func (m *RetireOwners) Fail(err error) { m.Reply <- err }

// Fail answers the request with err.
func (m *ResetArena) Fail(err error) { m.Reply <- err }

// Fail answers the request with err and no module.
func (m *LoadModule) Fail(err error) { m.Reply <- LoadModuleReply{Err: err} }

// Fail answers the request with err.
func (m *UnloadModule) Fail(err error) { m.Reply <- err }
