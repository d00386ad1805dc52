package loadgen

import (
	"math/rand/v2"
	"strings"
)

// words are common short English words; most are a single token in the
// vocabularies of Llama-family and GPT-style tokenizers, so a prompt of n of
// them is about n tokens long.
var words = strings.Fields(`
the of and to in is was he for it with as his on be at by had are but from
or have an they which one you were her all she there would their we him been
has when who will more no if out so said what up its about into than them can
only other new some could time these two may then do first any my now such
like our over man me even most made after also did many before must through
back years where much your way well down should because each just those people
how too little state good very make world still own see men work long get here
between both life being under never day same another know while last might us
great old year off come since against go came right used take three small
house water room light river tree stone green blue red white black city road
field morning night window garden music story table paper voice hand eye face
door head friend country children mother father family school question number
point group problem fact part place case week company system program word home
open close read write walk talk think feel look keep give find tell ask seem
leave call try turn start show hear play run move live believe hold bring
happen stand lose pay meet include continue set learn change lead understand
watch follow stop create speak allow add spend grow offer remember love
consider appear buy wait serve die send expect build stay fall cut reach kill
remain suggest raise pass sell require report decide pull quiet bright warm
cold early late simple clear strong free full sure real best better true whole
`)

// makePrompt returns n words chosen from the word list by a generator seeded
// with (seed, index), separated by single spaces.
func makePrompt(seed uint64, index int, n int) string {
	r := rand.New(rand.NewPCG(seed, uint64(index)))
	var b strings.Builder
	b.Grow(n * 7)
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(words[r.IntN(len(words))])
	}
	return b.String()
}
