// Package otcsample is the built-in OTC toolkit: the tools of the OTC spec's own
// examples (Calculator.Add, Doorbell.Ring, System.GetTimestamp,
// Gmail.GetEmails, SMS.Send), served when no upstream is named. Every tool is
// a sample: none touches anything real, sends anything or reads any mailbox.
package otcsample
