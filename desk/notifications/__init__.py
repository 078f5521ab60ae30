"""Notifications: people hear about the orders that concern them, in the desk (the bell) and by email."""
