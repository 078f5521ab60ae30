"""The bell in the header and the list of one's notifications."""
