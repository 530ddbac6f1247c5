package statelog

// SetMaxGivenUp sets how many given-up writes may wait for Kafka (tests).
func (l *Log) SetMaxGivenUp(n int64) { l.maxGivenUp = n }

// GivenUp is how many given-up writes wait for Kafka (tests).
func (l *Log) GivenUp() int64 { return l.givenUp.Load() }
