module tandem/internal/jinja/jinjacmp

go 1.26.0

require (
	github.com/ardanlabs/jinja v1.8.0
	tandem v0.0.0
)

require golang.org/x/text v0.44.0 // indirect

replace tandem => ../../..
