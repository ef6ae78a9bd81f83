"""Operations on a deployed stack through the Automation API: pause, resume, and destroy that keeps the data."""
