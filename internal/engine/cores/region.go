package cores

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Limits of a region.
const (
	// MaxSlots is the most processes one region serves: the cores each
	// holds are packed 8 bits a slot in one 64-bit word.
	MaxSlots = 8
	// MaxCores is the most cores a region shares (8 bits a slot).
	MaxCores = 255
)

// The region's layout, in 64-bit words (every word is used atomically).
const (
	wordMagic = 0 // regionMagic
	wordShape = 1 // version<<32 | cores<<16 | slots
	wordAlloc = 2 // cores held, 8 bits per slot (slot i in bits 8i..8i+7)
	slotBase  = 8 // slot i's words start at slotBase + i*slotWords (one cache line each)
	slotWords = 8
	// A slot's words.
	slotPrio = 0 // the slot's Priority, | starvingBit while its caller waits past MaxPark
	slotBeat = 1 // unix nanoseconds of the owner's last heartbeat (0: never opened)
	slotPID  = 2 // the owner's process id, for debugging

	regionWords   = slotBase + MaxSlots*slotWords
	regionBytes   = 4096               // a page; regionWords*8 fits
	regionMagic   = 0x74616e64656d636c // "tandemcl"
	regionVersion = 1
	starvingBit   = 1 << 8
)

// Region is the host-local shared memory a lease lives in: a page of
// atomic words mapped by every process that takes part. `tandem up`
// creates one (Create) and hands its file to the workers it starts; each
// worker opens it (Open) and takes its slot (Region.Lease).
type Region struct {
	f     *os.File
	w     []atomic.Uint64 // the mapped page
	cores int
	slots int
}

// Create makes a region sharing cores cores between slots processes, in
// an anonymous memory file (a memfd on Linux, an unlinked temporary file
// elsewhere) that children inherit through File.
func Create(cores, slots int) (*Region, error) {
	if cores < 1 || cores > MaxCores {
		return nil, fmt.Errorf("cores: a lease shares 1..%d cores, got %d", MaxCores, cores)
	}
	if slots < 1 || slots > MaxSlots {
		return nil, fmt.Errorf("cores: a lease serves 1..%d processes, got %d", MaxSlots, slots)
	}
	f, err := memFile("tandem-core-lease") // exec.Cmd.ExtraFiles passes it on
	if err != nil {
		return nil, fmt.Errorf("cores: create the shared region: %w", err)
	}
	if err := f.Truncate(regionBytes); err != nil {
		f.Close()
		return nil, fmt.Errorf("cores: size the shared region: %w", err)
	}
	r, err := mapRegion(f)
	if err != nil {
		f.Close()
		return nil, err
	}
	r.w[wordShape].Store(regionVersion<<32 | uint64(cores)<<16 | uint64(slots))
	r.w[wordMagic].Store(regionMagic)
	r.cores, r.slots = cores, slots
	return r, nil
}

// Open maps the region spec names: "fd:N" (a file descriptor inherited
// from the process that created it, e.g. fd:3 for exec.Cmd.ExtraFiles[0])
// or the path of a file holding one (e.g. under /dev/shm).
func Open(spec string) (*Region, error) {
	var f *os.File
	if n, ok := strings.CutPrefix(spec, "fd:"); ok {
		fd, err := strconv.Atoi(n)
		if err != nil || fd < 0 {
			return nil, fmt.Errorf("cores: --core-lease %q: want fd:N with N a file descriptor, or a path", spec)
		}
		f = os.NewFile(uintptr(fd), "core-lease")
		if f == nil {
			return nil, fmt.Errorf("cores: --core-lease %q: not an open file descriptor", spec)
		}
	} else {
		var err error
		if f, err = os.OpenFile(spec, os.O_RDWR, 0); err != nil {
			return nil, fmt.Errorf("cores: open the core lease region: %w", err)
		}
	}
	st, err := f.Stat()
	if err != nil || st.Size() < regionBytes {
		f.Close()
		if err == nil {
			err = fmt.Errorf("%d bytes, want %d", st.Size(), regionBytes)
		}
		return nil, fmt.Errorf("cores: --core-lease %q is not a core lease region (%v): it is made by `tandem up`", spec, err)
	}
	r, err := mapRegion(f)
	if err != nil {
		f.Close()
		return nil, err
	}
	shape := r.w[wordShape].Load()
	if r.w[wordMagic].Load() != regionMagic || shape>>32 != regionVersion {
		r.Close()
		return nil, fmt.Errorf("cores: --core-lease %q is not a version-%d core lease region: it is made by `tandem up` of the same build", spec, regionVersion)
	}
	r.cores, r.slots = int(shape>>16&0xffff), int(shape&0xffff)
	if r.cores < 1 || r.cores > MaxCores || r.slots < 1 || r.slots > MaxSlots {
		r.Close()
		return nil, fmt.Errorf("cores: --core-lease %q has a corrupt header (%d cores, %d slots)", spec, r.cores, r.slots)
	}
	return r, nil
}

func mapRegion(f *os.File) (*Region, error) {
	mem, err := unix.Mmap(int(f.Fd()), 0, regionBytes, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("cores: map the shared region: %w", err)
	}
	// mmap returns page-aligned memory, so every word is 8-byte aligned.
	w := unsafe.Slice((*atomic.Uint64)(unsafe.Pointer(&mem[0])), regionWords)
	return &Region{f: f, w: w}, nil
}

// Cores returns how many cores the region shares.
func (r *Region) Cores() int { return r.cores }

// Slots returns how many processes the region serves.
func (r *Region) Slots() int { return r.slots }

// File returns the region's file, to pass to a child (exec.Cmd.ExtraFiles).
func (r *Region) File() *os.File { return r.f }

// Close closes the region's file. The mapping itself stays until the
// process exits (one page): a pool helper may still give back a core just
// after the last round returned (the caller waits for chunks, not for
// helpers), and must find mapped memory. Leases taken from it should be
// closed first. Close is idempotent.
func (r *Region) Close() error {
	if r.f == nil {
		return nil
	}
	err := r.f.Close()
	r.f = nil
	return err
}

func (r *Region) slot(i, word int) *atomic.Uint64 { return &r.w[slotBase+i*slotWords+word] }

// held returns slot i's cores in the alloc word a.
func held(a uint64, i int) int { return int(a >> (8 * i) & 0xff) }
