package fileformat

// The tags that start the records of a section, in both formats.
const (
	TagEnd    = 0 // the end of the section: nothing may follow
	TagState  = 1 // entries of one state
	TagTimers = 2 // timers of one service and time domain
)

// Records reads the records of a section up to its end tag. A state record
// starts with the state's position in the metadata (below states) and an
// entry count; a timer record with the timer service's position (below
// services), a time domain byte (0 event time, 1 processing time) and a
// timer count. Records reads that start, then calls entries or timers to
// read the count's worth, so a callback need not check what it is given.
// Counts are bounded by the bytes left (an entry takes at least 2 bytes, a
// timer timerSize) and nothing is allocated. It returns the first problem,
// d.Err (wrapping d.Corrupt: an unknown tag, bytes after the end tag, a
// count or position out of range, the callbacks' own reads), or the first
// error a callback returns.
func (d *Decoder) Records(states, services, timerSize int, entries func(state, n int) error, timers func(service int, domain byte, n int) error) error {
	for {
		switch tag := d.Byte(); {
		case d.Err != nil:
			return d.Err
		case tag == TagEnd:
			if d.Left() != 0 {
				d.Fail("%d bytes after the end tag", d.Left())
			}
			return d.Err
		case tag == TagState:
			i := d.Count(states)
			n := d.Count(d.Left()/2 + 1)
			if d.Err != nil {
				return d.Err
			}
			if err := entries(i, n); err != nil {
				return err
			}
		case tag == TagTimers:
			j := d.Count(services)
			dom := d.Byte()
			if dom > 1 {
				d.Fail("time domain %d", dom)
			}
			n := d.Count(d.Left()/timerSize + 1)
			if d.Err != nil {
				return d.Err
			}
			if err := timers(j, dom, n); err != nil {
				return err
			}
		default:
			d.Fail("unknown tag %d", tag)
		}
	}
}
