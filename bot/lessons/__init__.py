"""The experience bank: lessons, their audit, mining them from campaigns, and what a campaign
uses of them."""
