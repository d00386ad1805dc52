module tandem

go 1.26
