package vm

// CallbacksInUse reports the entries of l's callback table in use: the
// Immediates and Deferreds scheduled and the records of frames that wait
// with a timeout, a cancel handler or a Resumer. Tests check that none
// outlives its flow.
func CallbacksInUse(l *Loop) int {
	free := 0
	for slot := l.cbFree; slot != 0; slot = l.cbs[slot].seq {
		free++
	}
	return len(l.cbs) - 1 - free
}
