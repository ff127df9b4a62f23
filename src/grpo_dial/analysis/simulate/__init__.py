"""(package)"""
