package arena

// Account sums the memory of a set of arenas owned by one goroutine; the VM
// gives one to each event loop.
//
// The fields are plain integers rather than atomics because only the owning
// goroutine updates or reads them. [Arena.Abandon] leaves the account alone so
// that the owner can apply its result later, on its own goroutine.
type Account struct {
	InUse    int64 // bytes currently allocated (each allocation counted at its size-class size)
	Reserved int64 // bytes of chunks currently held by the arenas of this account
	Arenas   int64 // arenas initialized on this account and not yet released/abandoned
}

// Remove takes an abandoned arena off the account: the bytes Abandon
// returned for it, and the arena itself.
func (acct *Account) Remove(inUse, reserved int64) {
	acct.InUse -= inUse
	acct.Reserved -= reserved
	acct.Arenas--
}
