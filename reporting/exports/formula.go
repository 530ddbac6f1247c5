package exports

// FormulaSafe returns a text cell of a CSV file so that a spreadsheet
// shows it as text rather than running it as a formula (OWASP, CSV
// injection): a string that begins with '=', '+', '-', '@', a tab or a
// carriage return gets a leading apostrophe. Search queries, names and ids
// are typed by shoppers, vendors and advertisers. Only text cells go
// through it: numbers written as numbers (a negative amount included) stay
// numbers. It is the one neutraliser of every CSV Endcap writes (export
// files, the console's performance CSV).
func FormulaSafe(s string) string {
	if formulaStart(s) {
		return "'" + s
	}
	return s
}

// formulaStart reports whether a spreadsheet may read s as a formula.
func formulaStart(s string) bool {
	if s == "" {
		return false
	}
	switch s[0] {
	case '=', '+', '-', '@', '\t', '\r':
		return true
	}
	return false
}
